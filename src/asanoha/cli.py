"""The ``asanoha`` command."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from asanoha.app import App

cli = typer.Typer(
    help="asanoha: features, event store, service layer and Celery jobs.", no_args_is_help=True
)
DEMO_APP = "asanoha.handlers.demo.app:app"


def load_app(reference: str) -> App:
    """Import ``package.module:attribute`` and return the ``App`` it names."""
    module_name, _, attribute = reference.partition(":")
    found = getattr(importlib.import_module(module_name), attribute or "app")
    if not isinstance(found, App):
        raise typer.BadParameter(f"{reference} is a {type(found).__name__}, not an asanoha App")
    return found


@cli.command()
def demo(
    workdir: Annotated[
        Path | None, typer.Option(help="Keep the demo database in this folder.")
    ] = None,
) -> None:
    """Run the demo application embedded (SQLite, in-process broker and worker)."""
    from asanoha.handlers.demo.walkthrough import run_walkthrough

    run_walkthrough(Console(), workdir)


@cli.command()
def serve(
    app: Annotated[str, typer.Option(help="The App to serve, as module:attribute.")] = DEMO_APP,
    host: str = "127.0.0.1",
    port: int = 8000,
) -> None:
    """Serve the HTTP API with uvicorn (creates missing tables first)."""
    import uvicorn

    loaded = load_app(app)
    loaded.create_schema()
    uvicorn.run(loaded.http, host=host, port=port)


@cli.command()
def worker(
    app: Annotated[
        str, typer.Option(help="The App whose jobs to run, as module:attribute.")
    ] = DEMO_APP,
    concurrency: Annotated[int, typer.Option(help="Worker processes.")] = 2,
) -> None:
    """Run a Celery worker consuming every lane queue (creates missing tables first)."""
    from asanoha.workers.lanes import lane_queues

    loaded = load_app(app)
    loaded.create_schema()
    queues = ",".join(lane_queues(loaded.settings))
    loaded.celery.worker_main(
        ["worker", f"--concurrency={concurrency}", f"--queues={queues}", "--loglevel=INFO"]
    )


def main() -> None:
    """Entry point of the ``asanoha`` script."""
    cli()


if __name__ == "__main__":
    main()
