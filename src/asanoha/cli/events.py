"""``asanoha events``: prune old events (optionally into an archive) and restore an archive."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Annotated

import typer

from asanoha.cli.app_loading import AppOption, load_app
from asanoha.platform.errors import AsanohaError

events = typer.Typer(help="The event store: prune old events into an archive, restore one.")

_AGE = re.compile(r"^(\d+)([dhm])$")
_UNITS = {"d": "days", "h": "hours", "m": "minutes"}


def parse_age(text: str) -> dt.timedelta:
    """``365d``, ``12h`` or ``30m`` as a duration; ``typer.BadParameter`` otherwise."""
    found = _AGE.match(text.strip())
    if found is None or int(found.group(1)) < 1:
        raise typer.BadParameter(f"{text!r} is no age: write a count and d, h or m (e.g. 365d)")
    return dt.timedelta(**{_UNITS[found.group(2)]: int(found.group(1))})


@events.command()
def prune(
    app: AppOption,
    older_than: Annotated[
        str, typer.Option("--older-than", help="Prune events older than this (365d, 12h, 30m).")
    ],
    archive: Annotated[
        Path | None,
        typer.Option(
            "--archive",
            help="Write the pruned events to a compressed JSON lines file in this folder first.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Delete the events older than --older-than, in one transaction, unless a consumer has
    not handled them yet (exit 1 with consumer_lag naming it; nothing is deleted). The
    archive keeps them as stored: personal values stay sealed."""
    from asanoha.platform.store.retention import prune_events

    age = parse_age(older_than)
    loaded = load_app(app)
    try:
        with loaded.database.begin() as conn:
            result = prune_events(conn, loaded.service.tables, older_than=age, archive_dir=archive)
    except AsanohaError as error:
        typer.echo(f"{error.reason}: {error.message}", err=True)
        raise typer.Exit(1) from None
    kept = f"; archived to {result.archive}" if result.archive else ""
    typer.echo(f"pruned {result.pruned:,} event(s) up to position {result.cut}{kept}")


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
