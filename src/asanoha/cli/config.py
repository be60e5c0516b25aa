"""``asanoha config``: the effective settings, where each came from, and ``--check``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from asanoha.cli.app_loading import OptionalAppOption, load_app
from asanoha.cli.listings import JsonOption, print_json, print_table

if TYPE_CHECKING:
    from asanoha.app import App


def config(
    app: OptionalAppOption = None,
    as_json: JsonOption = False,
    check: Annotated[
        bool,
        typer.Option(
            "--check",
            help="Print one line per problem the processes would refuse, and exit 1 if any.",
        ),
    ] = False,
) -> None:
    """Print every setting with its value and where it came from: `default`, `environment`,
    `.env`, or `application` (a `Settings(...)` in the application's code).

    Secrets are shown as `***` and passwords in URLs masked. With `--app` (or `ASANOHA_APP`)
    the application's own settings are shown, and `--check` also names a missing master key
    for an application with personal fields.
    """
    from pydantic import ValidationError

    from asanoha.platform.settings import Settings

    # The platform is imported inside the functions that use it: ``asanoha --help`` imports
    # this module (see ``asanoha.cli``).
    from asanoha.platform.settings_sources import (
        effective_settings,
        settings_problems,
        validation_problems,
    )

    loaded = None
    try:
        loaded = load_app(app) if app is not None else None
        found = effective_settings(loaded.settings if loaded is not None else None)
    except ValidationError as error:
        for line in validation_problems(error):
            typer.echo(f"error: {line}", err=True)
        raise typer.Exit(1) from None
    if check:
        problems = settings_problems(loaded.settings if loaded is not None else Settings())
        if loaded is not None:
            problems += _personal_data_problems(loaded)
        for line in problems:
            typer.echo(f"error: {line}", err=True)
        if problems:
            raise typer.Exit(1)
        typer.echo("no problems found")
        return
    if as_json:
        print_json({"settings": [item.to_json() for item in found]})
        return
    print_table(
        ("variable", "value", "source"),
        ((item.variable, item.value, item.source) for item in found),
        no_wrap=("variable",),
    )


def _personal_data_problems(loaded: App) -> list[str]:
    """The refusal ``serve`` and ``worker`` would give an application with personal fields
    and no master key (the embedded default makes its own key: no problem there)."""
    from asanoha.platform.personal.boot import MissingMasterKeyError, check_personal_data_keys

    if loaded.settings.uses_embedded_default:
        return []
    try:
        check_personal_data_keys(loaded.settings, loaded.registry, "serve")
    except MissingMasterKeyError as exc:
        return [str(exc)]
    return []
