"""``asanoha consumers``: status of the event consumers, and the operations on them.

The command has no tenant: it operates the application's cursors, which every tenant shares.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable
from typing import Annotated

import typer

from asanoha.cli.app_loading import AppOption, load_app
from asanoha.cli.listings import JsonOption, print_json, print_table
from asanoha.platform.consumers import Consumers, ConsumerStatus
from asanoha.platform.errors import AsanohaError

consumers = typer.Typer(help="Event consumers: status, run, restart, skip, disable, enable.")

NameArgument = Annotated[str, typer.Argument(help="The consumer's QN, e.g. shop:consumer:mailer.")]


@consumers.command()
def status(app: AppOption, as_json: JsonOption = False) -> None:
    """Every consumer: position, lag, status, failed attempts, the event it is stopped at and
    when it tries that event again."""
    found = load_app(app).consumers.status()
    if as_json:
        print_json({"consumers": [dataclasses.asdict(consumer) for consumer in found]})
        return
    now = dt.datetime.now(dt.UTC)
    print_table(
        (
            "consumer",
            "position",
            "lag",
            "status",
            "attempts",
            "event",
            "next attempt",
            "last error",
        ),
        (
            (
                consumer.name,
                str(consumer.position),
                str(consumer.lag),
                consumer.status,
                str(consumer.attempts),
                "" if consumer.event_id is None else str(consumer.event_id),
                _next_attempt(consumer, now),
                consumer.last_error or "",
            )
            for consumer in found
        ),
        no_wrap=("consumer",),
    )


@consumers.command()
def run(app: AppOption) -> None:
    """Advance every consumer until it has caught up (what the workers do on their tick)."""
    delivered = load_app(app).consumers.run_once()
    typer.echo(f"delivered {delivered} event(s)")


@consumers.command()
def restart(name: NameArgument, app: AppOption) -> None:
    """Let a consumer stopped at an event (dead, or waiting for its next attempt) try it
    again at once, with fresh attempts."""
    _operate(app, name, lambda found: found.restart(name), "restarted")


@consumers.command()
def skip(name: NameArgument, app: AppOption) -> None:
    """Move a consumer past the event it is stopped at (recorded on its cursor row)."""
    _operate(app, name, lambda found: f"skipped event {found.skip(name)}", None)


@consumers.command()
def disable(name: NameArgument, app: AppOption) -> None:
    """Stop delivering events to a consumer until it is enabled."""
    _operate(app, name, lambda found: found.disable(name), "disabled")


@consumers.command()
def enable(name: NameArgument, app: AppOption) -> None:
    """Resume a disabled consumer as it was: one that was dead stays dead until restarted or
    told to skip its event."""
    _operate(app, name, lambda found: found.enable(name), "enabled")


def _operate(
    app: str, name: str, operation: Callable[[Consumers], object], done: str | None
) -> None:
    loaded = load_app(app).consumers
    try:
        said = operation(loaded)
    except AsanohaError as error:
        typer.echo(f"{error.reason}: {error.message}", err=True)
        raise typer.Exit(1) from None
    [after] = [found for found in loaded.status() if found.name == name]
    state = describe_state(after)
    typer.echo(f"{name}: {done or said}" + (f"; {state}" if state else ""))


def describe_state(found: ConsumerStatus) -> str:
    """A consumer's state in words, after an operation ("" for a disabled one stopped at no
    event: the operation said it all)."""
    if found.status == "dead":
        return f"dead at event {found.event_id} (restart or skip it)"
    if found.status == "disabled":
        return "" if found.event_id is None else f"stopped at event {found.event_id}"
    if found.event_id is not None:
        return f"tries event {found.event_id} {_next_attempt(found, dt.datetime.now(dt.UTC))}"
    return f"idle, lag {found.lag}"


def _next_attempt(found: ConsumerStatus, now: dt.datetime) -> str:
    if found.event_id is None or found.status == "dead":
        return ""
    due = found.next_attempt_at
    if due is None or due <= now:
        return "now"
    return f"in {(due - now).total_seconds():.0f} s"
