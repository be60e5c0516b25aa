"""The signing settings every command that starts the application checks before anything else.

A wrong secret or algorithm would otherwise start and answer every call with 401 or 500; the
public placeholder secret would let anyone in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from asanoha.cli.notices import notify

if TYPE_CHECKING:
    from asanoha.app import App

# The platform is imported inside the functions that use it: ``asanoha --help`` imports
# this module (see ``asanoha.cli``).


def refuse_insecure_signing(app: App, *, checks_tokens: bool = True) -> None:
    """Exit with status 1 and the settings to fix when ``require_signing_settings`` refuses
    the application's settings (``checks_tokens=False``: the placeholder is no fault)."""
    from asanoha.platform.settings import InsecureSettingsError, require_signing_settings

    try:
        require_signing_settings(app.settings, checks_tokens=checks_tokens)
    except InsecureSettingsError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(1) from None


def refuse_plaintext_personal_data(app: App, process: str) -> None:
    """Exit with status 1 when ``app`` holds personal data and has no master key outside
    development; on the embedded default, use (or make) the key beside its SQLite file."""
    from asanoha.platform.personal.boot import MissingMasterKeyError, prepare_personal_data

    try:
        told = prepare_personal_data(app.settings, app.registry, app.service.personal, process)
    except MissingMasterKeyError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(1) from None
    if told:
        notify(told)
