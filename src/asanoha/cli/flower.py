"""``asanoha flower``: Flower, the Celery monitor, on this application's workers and tasks only."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated

import typer

from asanoha.cli.app_loading import AppOption, load_app
from asanoha.cli.celery_runner import (
    OWNED_GLOBAL_OPTIONS,
    refuse_memory_broker,
    refuse_owned_options,
    run_celery,
)

#: The environment variable ``--basic-auth`` falls back to (keeps the password out of ``ps``).
BASIC_AUTH_VARIABLE = "ASANOHA_FLOWER_BASIC_AUTH"

#: Flower options ``asanoha flower`` sets: refused after ``--`` (Flower takes ``_`` or ``-``).
OWNED_FLOWER_OPTIONS: Mapping[str, str] = {
    **OWNED_GLOBAL_OPTIONS,
    "--port": "--port",
    "--address": "--address",
    "--basic_auth": "--basic-auth",
    "--basic-auth": "--basic-auth",
}


def flower(
    app: AppOption,
    port: Annotated[int, typer.Option(help="Port of Flower's web interface and API.")] = 5555,
    address: Annotated[
        str, typer.Option(help="Address to listen on (0.0.0.0: every interface).")
    ] = "127.0.0.1",
    basic_auth: Annotated[
        str | None,
        typer.Option(
            envvar=BASIC_AUTH_VARIABLE,
            help="user:password (several separated by commas) every page and API call of "
            "Flower asks for. Prefer the environment variable: a command line shows in ps.",
            show_default=False,
        ),
    ] = None,
    no_auth: Annotated[
        bool,
        typer.Option(
            "--no-auth",
            help="Run without authentication (behind a proxy that authenticates).",
        ),
    ] = False,
    flower_options: Annotated[
        list[str] | None,
        typer.Argument(
            help="Further Flower options, after -- (for example: -- --max_tasks=50000).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Run Flower for this application: its workers, and its tasks under their job names.

    Requires --basic-auth user:password (or ASANOHA_FLOWER_BASIC_AUTH), or an explicit
    --no-auth. Flower's /metrics (Prometheus) and /healthcheck answer without
    authentication. Other Flower options pass through after --, for example
    'asanoha flower --app shop:app -- --max_tasks=50000'.
    """
    extra = list(flower_options or [])
    refuse_owned_options("flower", extra, OWNED_FLOWER_OPTIONS)
    if basic_auth is not None and no_auth:
        raise typer.BadParameter(
            f"pass --basic-auth ({BASIC_AUTH_VARIABLE}) or --no-auth, not both",
            param_hint="--no-auth",
        )
    if basic_auth is None and not no_auth:
        typer.echo(
            "asanoha flower needs authentication: pass --basic-auth user:password or set "
            f"{BASIC_AUTH_VARIABLE}=user:password (several pairs separated by commas), or "
            "--no-auth when a proxy in front of Flower authenticates.",
            err=True,
        )
        raise typer.Exit(2)
    if basic_auth is not None:
        check_basic_auth(basic_auth)
    loaded = load_app(app)
    refuse_memory_broker(loaded, "flower")
    argv = ["flower", f"--port={port}", f"--address={address}"]
    if basic_auth is not None:
        argv.append(f"--basic_auth={basic_auth}")
    run_celery(loaded.celery, [*argv, *extra])


def check_basic_auth(value: str) -> None:
    """Refuse a ``--basic-auth`` value that is not ``user:password[,user:password...]``."""
    for pair in value.split(","):
        user, colon, password = pair.partition(":")
        if not (user.strip() and colon and password):
            raise typer.BadParameter(
                "expected user:password, several separated by commas (a password may not "
                "contain a comma)",
                param_hint=f"--basic-auth ({BASIC_AUTH_VARIABLE})",
            )
