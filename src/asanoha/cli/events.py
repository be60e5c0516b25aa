"""``asanoha events``: prune old events (optionally into an archive) and restore an archive."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Annotated

import typer

from asanoha.cli.app_loading import AppOption, load_app
from asanoha.platform.errors import AsanohaError

events = typer.Typer(help="The event store: prune old events into an archive, restore one.")


def parse_age(text: str) -> dt.timedelta:
    """``365d``, ``12h`` or ``30m`` as a duration; ``typer.BadParameter`` otherwise."""
    # Imported here: ``asanoha --help`` imports this module (see ``asanoha.cli``).
    from asanoha.platform.model.retention import parse_age as age_of

    try:
        return age_of(text)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


@events.command()
def prune(
    app: AppOption,
    older_than: Annotated[
        str | None,
        typer.Option(
            "--older-than",
            help="Prune events older than this (365d, 12h, 30m); default: each event type's "
            "keep_for. Streams closed by forget are pruned whatever their age.",
            show_default=False,
        ),
    ] = None,
    archive: Annotated[
        Path | None,
        typer.Option(
            "--archive",
            help="Write the pruned events to a compressed JSON lines file in this folder first.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Delete the events older than --older-than (without it: the events of each type
    declared with keep_for= older than that), and every event of the entity streams a
    forget closed (their last event is the forgotten one), in one transaction, unless a
    consumer has not handled them yet (exit 1 with consumer_lag naming it; nothing is
    deleted). The archive keeps them as stored: personal values stay sealed."""
    from asanoha.platform.store.retention import declared_retention, forget_markers, prune_events

    age = parse_age(older_than) if older_than is not None else None
    loaded = load_app(app)
    declared = declared_retention(loaded.registry)
    markers = forget_markers(loaded.registry)
    if age is None and not declared and not markers:
        raise typer.BadParameter(
            "no event type declares keep_for=... and no entity's stream can be closed by "
            "forget; pass --older-than",
            param_hint="--older-than",
        )
    try:
        with loaded.database.begin() as conn:
            result = prune_events(
                conn,
                loaded.service.tables,
                older_than=age,
                keep_for=None if age is not None else declared,
                forgotten=markers,
                archive_dir=archive,
            )
    except AsanohaError as error:
        typer.echo(f"{error.reason}: {error.message}", err=True)
        raise typer.Exit(1) from None
    closed = (
        f" ({result.closed_streams:,} stream(s) closed by forget)" if result.closed_streams else ""
    )
    kept = f"; archived to {result.archive}" if result.archive else ""
    typer.echo(f"pruned {result.pruned:,} event(s) up to position {result.cut}{closed}{kept}")


@events.command()
def restore(
    app: AppOption,
    archive: Annotated[Path, typer.Argument(help="An archive file written by events prune.")],
) -> None:
    """Insert the events of an archive again, at their positions, in one transaction."""
    from asanoha.platform.store.retention import restore_archive

    loaded = load_app(app)
    with loaded.database.begin() as conn:
        restored = restore_archive(conn, loaded.service.tables, archive)
    typer.echo(f"restored {restored:,} event(s) from {archive}")
