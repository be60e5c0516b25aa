"""``asanoha consumers``: status of the event consumers, and the operations on them.

The command has no tenant: it operates the application's cursors, which every tenant shares.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated

import typer

from asanoha.cli.app_loading import AppOption, load_app
from asanoha.cli.listings import JsonOption, print_json, print_table
from asanoha.platform.errors import AsanohaError

if TYPE_CHECKING:
    from asanoha.platform.consumers import Consumers, ConsumerStatus

consumers = typer.Typer(
    help="Event consumers: status, run, restart, skip, disable, enable, repartition."
)

NameArgument = Annotated[str, typer.Argument(help="The consumer's QN, e.g. shop:consumer:mailer.")]
PartitionOption = Annotated[
    int | None,
    typer.Option(
        "--partition", help="Only this partition of a partitioned consumer (default: all)."
    ),
]


@consumers.command()
def status(app: AppOption, as_json: JsonOption = False) -> None:
    """Every consumer: position, lag, status, failed attempts, the event it is stopped at and
    when it tries that event again; a partitioned consumer's sum, then each partition
    (``name#p``)."""
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
                consumer.name if consumer.partition is None else f"{name}#{consumer.partition}",
                str(consumer.position),
                _lag(consumer),
                consumer.status,
                str(consumer.attempts),
                "" if consumer.event_id is None else str(consumer.event_id),
                _next_attempt(consumer, now),
                consumer.last_error or "",
            )
            for name, consumer in _rows(found)
        ),
        no_wrap=("consumer",),
    )


def _lag(consumer: ConsumerStatus) -> str:
    """The lag, and the events parked for tenants that switched the feature off."""
    if not consumer.parked:
        return str(consumer.lag)
    return f"{consumer.lag} (+{consumer.parked} parked)"


@consumers.command()
def run(app: AppOption) -> None:
    """Advance every consumer until it has caught up (what the workers do on their tick)."""
    delivered = load_app(app).consumers.run_once()
    typer.echo(f"delivered {delivered} event(s)")


@consumers.command()
def restart(name: NameArgument, app: AppOption, partition: PartitionOption = None) -> None:
    """Let a consumer stopped at an event (dead, or waiting for its next attempt) try it
    again at once, with fresh attempts."""
    _operate(app, name, lambda found: found.restart(name, partition), "restarted")


@consumers.command()
def skip(name: NameArgument, app: AppOption, partition: PartitionOption = None) -> None:
    """Move a consumer past the event it is stopped at (recorded on its cursor row); without
    --partition every stopped partition skips its event."""
    _operate(app, name, lambda found: f"skipped event {found.skip(name, partition)}", None)


@consumers.command()
def disable(name: NameArgument, app: AppOption, partition: PartitionOption = None) -> None:
    """Stop delivering events to a consumer until it is enabled."""
    _operate(app, name, lambda found: found.disable(name, partition), "disabled")


@consumers.command()
def enable(name: NameArgument, app: AppOption, partition: PartitionOption = None) -> None:
    """Resume a disabled consumer as it was: one that was dead stays dead until restarted or
    told to skip its event."""
    _operate(app, name, lambda found: found.enable(name, partition), "enabled")


@consumers.command()
def repartition(
    name: NameArgument,
    partitions: Annotated[int, typer.Argument(min=1, help="The number of partitions it gets.")],
    app: AppOption,
) -> None:
    """Give a consumer N partitions: it stops at a common position (one transaction, after
    the passes running on it) and its cursors are split or merged; no event is lost or
    delivered twice. Refused while a partition is stopped at a failing event."""

    def change(found: Consumers) -> str:
        before = found.repartition(name, partitions)
        return f"{before} -> {partitions} partition(s)"

    _operate(app, name, change, None)


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


def _rows(found: list[ConsumerStatus]) -> list[tuple[str, ConsumerStatus]]:
    """Each consumer, followed by its partitions when it has more than one."""
    rows: list[tuple[str, ConsumerStatus]] = []
    for consumer in found:
        rows.append((consumer.name, consumer))
        rows += [(consumer.name, part) for part in consumer.partitions]
    return rows


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
