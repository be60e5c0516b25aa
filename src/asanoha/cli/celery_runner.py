"""How the asanoha commands that run a Celery program (worker, beat, flower, celery) hand it
their arguments: the options asanoha sets itself, the broker check, the exit code."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from celery import Celery

    from asanoha.app import App

#: Celery's global options that asanoha decides: the application and so its broker.
OWNED_GLOBAL_OPTIONS: Mapping[str, str] = {
    "-A": "the application comes from --app",
    "--app": "the application comes from --app",
    "-b": "the broker comes from ASANOHA_BROKER_URL",
    "--broker": "the broker comes from ASANOHA_BROKER_URL",
}


def run_celery(celery: Celery, argv: Sequence[str]) -> None:
    """Run Celery's command line with ``argv`` (no program name) and exit with its code.

    Celery's command line is a click program of its own: its usage errors are shown here
    as the ``celery`` program would show them, not as a traceback.
    """
    import click  # Celery's click, not the copy typer carries

    try:
        code = celery.start(list(argv))
    except click.ClickException as exc:
        exc.show()
        raise typer.Exit(exc.exit_code) from None
    except click.Abort:
        raise typer.Exit(1) from None
    if code:
        raise typer.Exit(code)


def refuse_owned_options(command: str, argv: Sequence[str], owned: Mapping[str, str]) -> None:
    """Exit when ``argv`` (what follows ``--``) sets an option asanoha sets itself."""
    for argument in argv:
        name = option_name(argument)
        if name is not None and name in owned:
            typer.echo(
                f"asanoha {command}: {argument} after -- sets an option asanoha sets itself "
                f"({owned[name]}); pass it to asanoha {command}, before --.",
                err=True,
            )
            raise typer.Exit(2)


def option_name(argument: str) -> str | None:
    """The option an argument names: ``--queues=a`` -> ``--queues``, ``-c4`` -> ``-c``;
    ``None`` for a value."""
    if argument.startswith("--"):
        return argument.split("=", 1)[0]
    if argument.startswith("-") and len(argument) >= 2:
        return argument[:2]
    return None


def refuse_memory_broker(app: App, command: str) -> None:
    """Exit when the application uses the in-process broker, which only its own process
    reaches."""
    if app.settings.broker_url.startswith("memory://"):
        typer.echo(
            f"asanoha {command} needs a broker other processes reach; the in-process "
            "memory:// broker serves only 'asanoha serve' and 'asanoha demo'. Set "
            "ASANOHA_BROKER_URL (redis://... or amqp://...).",
            err=True,
        )
        raise typer.Exit(1)
