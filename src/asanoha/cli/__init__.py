"""The ``asanoha`` command: one module per command group, registered here."""

from __future__ import annotations

from importlib.metadata import version
from typing import Annotated

import typer

from asanoha.cli import consumers, demo, explain, jobs, mcp, migrate, serve, tokens, tools, worker
from asanoha.cli.app_loading import load_app

__all__ = ["cli", "load_app", "main"]

cli = typer.Typer(
    help="asanoha: features, event store, service layer and Celery jobs.", no_args_is_help=True
)


def show_version(value: bool) -> None:
    """Print the installed version and stop (``--version``)."""
    if value:
        typer.echo(f"asanoha {version('asanoha')}")
        raise typer.Exit()


@cli.callback()
def options(
    _version: Annotated[
        bool,
        typer.Option(
            "--version", callback=show_version, is_eager=True, help="Show the version and exit."
        ),
    ] = False,
) -> None:
    """asanoha: features, event store, service layer and Celery jobs."""


cli.command()(demo.demo)
cli.command()(mcp.mcp)
cli.command()(serve.serve)
cli.command()(worker.worker)
cli.command()(worker.beat)
cli.command()(tokens.token)
cli.command()(explain.explain)
cli.command()(tools.tools)
cli.add_typer(migrate.migrate, name="migrate")
cli.add_typer(consumers.consumers, name="consumers")
cli.add_typer(jobs.jobs, name="jobs")


def main() -> None:
    """Entry point of the ``asanoha`` script."""
    cli()
