"""``asanoha celery -- ...``: Celery's own command line against the application's Celery."""

from __future__ import annotations

from typing import Annotated

import typer

from asanoha.cli.app_loading import AppOption, load_app
from asanoha.cli.celery_runner import (
    OWNED_GLOBAL_OPTIONS,
    refuse_memory_broker,
    refuse_owned_options,
    run_celery,
)


def celery(
    app: AppOption,
    arguments: Annotated[
        list[str] | None,
        typer.Argument(
            help="Celery's command and its arguments, after -- (for example: -- inspect ping).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Run Celery's own command line against the application's Celery.

    Everything after -- goes to Celery, with the application's broker and settings:
    'asanoha celery --app shop:app -- inspect registered', '-- inspect ping', '-- purge',
    '-- events'. Remote control reaches only this application's workers (its own control
    exchange, named after ASANOHA_QUEUE_PREFIX).
    """
    argv = list(arguments or [])
    if not argv:
        typer.echo(
            "Name a Celery command after --, for example: "
            f"asanoha celery --app {app} -- inspect ping",
            err=True,
        )
        raise typer.Exit(2)
    refuse_owned_options("celery", argv, OWNED_GLOBAL_OPTIONS)
    loaded = load_app(app)
    refuse_memory_broker(loaded, "celery")
    run_celery(loaded.celery, argv)
