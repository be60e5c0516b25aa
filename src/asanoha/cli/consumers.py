"""``asanoha consumers``: status of the event consumers, and the operations on them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from asanoha.cli.app_loading import AppOption, load_app
from asanoha.platform.errors import AsanohaError

consumers = typer.Typer(help="Event consumers: status, run, restart, skip, disable, enable.")

NameArgument = Annotated[str, typer.Argument(help="The consumer's QN, e.g. shop:consumer:mailer.")]


@consumers.command()
def status(app: AppOption) -> None:
    """Every consumer: position, lag, status, failed attempts, the event it is stopped at."""
    table = Table()
    for column in ("consumer", "position", "lag", "status", "attempts", "event", "last error"):
        table.add_column(column)
    for found in load_app(app).consumers.status():
        table.add_row(
            found.name,
            str(found.position),
            str(found.lag),
            found.status,
            str(found.attempts),
            "" if found.event_id is None else str(found.event_id),
            found.last_error or "",
        )
    Console().print(table, highlight=False)


@consumers.command()
def run(app: AppOption) -> None:
    """Advance every consumer until it has caught up (what the workers do on their tick)."""
    delivered = load_app(app).consumers.run_once()
    typer.echo(f"delivered {delivered} event(s)")


@consumers.command()
def restart(name: NameArgument, app: AppOption) -> None:
    """Let a dead consumer try its failing event again, with fresh attempts."""
    _operate(lambda: load_app(app).consumers.restart(name), f"{name}: restarted")


@consumers.command()
def skip(name: NameArgument, app: AppOption) -> None:
    """Move a consumer past the event it is stopped at (recorded on its cursor row)."""
    loaded = load_app(app)
    _operate(lambda: typer.echo(f"{name}: skipped event {loaded.consumers.skip(name)}"), None)


@consumers.command()
def disable(name: NameArgument, app: AppOption) -> None:
    """Stop delivering events to a consumer until it is enabled."""
    _operate(lambda: load_app(app).consumers.disable(name), f"{name}: disabled")


@consumers.command()
def enable(name: NameArgument, app: AppOption) -> None:
    """Resume a disabled consumer."""
    _operate(lambda: load_app(app).consumers.enable(name), f"{name}: enabled")


def _operate(operation: Callable[[], object], done: str | None) -> None:
    try:
        operation()
    except AsanohaError as error:
        typer.echo(f"{error.reason}: {error.message}", err=True)
        raise typer.Exit(1) from None
    if done:
        typer.echo(done)
