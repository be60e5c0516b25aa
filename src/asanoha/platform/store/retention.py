"""Event retention: prune the events older than a cut, and the streams a ``forgotten``
event closed, optionally into an archive that ``restore_archive`` reads back.

The cut is a global position: the newest event the prune takes; the events older than the
age are pruned (a younger one below the cut stays). Nothing is pruned while a consumer has
not handled an event the prune takes that it follows (such an event after its position, or a
gap at or below the cut): 409 ``consumer_lag`` names it. Entity rows and declared
projections are kept in the write's transaction, so they never lag.

A stream closed by forget is an entity stream whose last event is the entity's own
``forgotten`` event: its row is gone and nothing more is written to it (a later event on it,
a domain event say, reopens it, and it is no longer taken). Every event of it is taken at
once, whatever its age, and the snapshots of the stream go with them: its row needs no
event (a rebuild brings back no row for it, as the ``forgotten`` event would have deleted
it), and its personal values already read as forgotten. Other streams of the subject (an
aggregate's, the ``subject-forgotten`` record of ``personal-data``) are not closed by the
forget and keep their events.

An archive file holds one event a line, as stored (personal values sealed, payload in the
version written), JSON with sorted keys, gzip-compressed without a timestamp: archiving the
same events again gives the same bytes. Aggregates keep working from a snapshot taken before
the cut; a load that would need a pruned event refuses with a message saying so
(``service/aggregates.py``).
"""

from __future__ import annotations

import datetime as dt
import gzip
import io
import json
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import ColumnElement, Connection, and_, delete, func, insert, or_, select

from asanoha.platform.errors import ConflictError, Reasons
from asanoha.platform.model import Registry
from asanoha.platform.store.snapshots import discard_snapshots
from asanoha.platform.store.tables import Tables

#: Events read, archived and deleted per statement.
PRUNE_BATCH = 5000
#: Streams closed by forget one prune takes at most (the next prune takes the rest).
CLOSED_STREAMS_PER_PRUNE = 1000
#: The stored columns an archive keeps, in this order.
ARCHIVED_COLUMNS = (
    "id",
    "stream_id",
    "stream_type",
    "tenant_id",
    "version",
    "type",
    "schema_version",
    "payload",
    "metadata",
    "created_at",
    "created_by",
    "partition_key",
)
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True)
class ClosedStream:
    """A stream closed by forget: its tenant, id, and the version of its ``forgotten``
    event (the prune takes the events up to it, none a writer appends after it meanwhile)."""

    tenant_id: str
    stream_id: str
    version: int


@dataclass(frozen=True)
class PruneResult:
    """What a prune did: the cut position, the events deleted, the archive written, and how
    many streams closed by forget it took whole."""

    cut: int
    pruned: int
    archive: Path | None
    closed_streams: int = 0


def pruned_selection(
    tables: Tables,
    *,
    older_than: dt.timedelta | None = None,
    keep_for: Mapping[str, dt.timedelta] | None = None,
    closed: Collection[ClosedStream] = (),
) -> ColumnElement[bool]:
    """The events a prune takes: older than ``older_than``, or of each type of ``keep_for``
    older than its age; and every event of the ``closed`` streams."""
    events = tables.events
    now = dt.datetime.now(dt.UTC)
    taken: list[ColumnElement[bool]] = []
    if older_than is not None:
        taken.append(events.c.created_at < now - older_than)
    elif keep_for:
        taken.extend(
            and_(events.c.type == type_, events.c.created_at < now - age)
            for type_, age in sorted(keep_for.items())
        )
    taken.extend(
        and_(
            events.c.tenant_id == stream.tenant_id,
            events.c.stream_id == stream.stream_id,
            events.c.version <= stream.version,
        )
        for stream in closed
    )
    if not taken:
        raise ValueError("prune what? give older_than, event types with keep_for, or streams")
    return or_(*taken)


def forget_markers(registry: Registry) -> dict[str, str]:
    """Entity stream type -> the ``forgotten`` event type that closes its streams."""
    return {entity.key: entity.event_qn("forgotten") for entity in registry.entities}


def closed_streams(
    conn: Connection,
    tables: Tables,
    markers: Mapping[str, str],
    limit: int = CLOSED_STREAMS_PER_PRUNE,
) -> list[ClosedStream]:
    """The streams whose last event is the ``forgotten`` event of their entity (``markers``:
    stream type -> that event type), oldest forget first, at most ``limit``."""
    if not markers:
        return []
    events = tables.events
    later = events.alias("later")
    after_marker = (
        select(later.c.id)
        .where(
            later.c.tenant_id == events.c.tenant_id,
            later.c.stream_id == events.c.stream_id,
            later.c.version > events.c.version,
        )
        .exists()
    )
    query = (
        select(events.c.tenant_id, events.c.stream_id, events.c.version)
        .where(
            events.c.type.in_(sorted(set(markers.values()))),
            or_(
                *(
                    and_(events.c.stream_type == stream_type, events.c.type == marker)
                    for stream_type, marker in sorted(markers.items())
                )
            ),
            ~after_marker,
        )
        .order_by(events.c.id)
        .limit(limit)
    )
    return [ClosedStream(str(t), str(s), int(v)) for t, s, v in conn.execute(query)]


def cut_position(conn: Connection, tables: Tables, selection: ColumnElement[bool]) -> int:
    """The newest position of the events ``selection`` takes (0: none)."""
    events = tables.events
    query = select(func.coalesce(func.max(events.c.id), 0)).where(selection)
    return int(conn.execute(query).scalar_one())


def check_consumers_past(
    conn: Connection, tables: Tables, cut: int, selection: ColumnElement[bool]
) -> None:
    """409 ``consumer_lag`` naming the first consumer (partition) that has not handled an
    event ``selection`` takes up to ``cut`` that it follows (or has a gap at or below it)."""
    consumers, events = tables.consumers, tables.events
    rows = conn.execute(
        select(
            consumers.c.name,
            consumers.c.partition,
            consumers.c.partitions,
            consumers.c.position,
            consumers.c.gaps,
            consumers.c.types,
        ).order_by(consumers.c.name, consumers.c.partition)
    ).all()
    for name, partition, partitions, position, gaps, followed in rows:
        if not followed:
            continue
        # Its events among those the prune takes (in its partition).
        taken = select(events.c.id).where(
            events.c.id <= cut, events.c.type.in_(list(followed)), selection
        )
        if int(partitions) > 1:
            taken = taken.where(events.c.partition_key % int(partitions) == int(partition))
        if conn.execute(taken.limit(1)).first() is None:
            continue
        # A gap: a position it has not seen yet (a writer still open there), kept waiting.
        if any(int(gap[0]) <= cut for gap in gaps or []):
            raise _lagging(name, partition, int(position), cut)
        unhandled = taken.where(events.c.id > position)
        if int(position) < cut and conn.execute(unhandled.limit(1)).first() is not None:
            raise _lagging(name, partition, int(position), cut)


def _lagging(name: str, partition: int, position: int, cut: int) -> ConflictError:
    return ConflictError(
        Reasons.CONSUMER_LAG, consumer=name, partition=partition, position=position, cut=cut
    )


def prune_events(
    conn: Connection,
    tables: Tables,
    *,
    older_than: dt.timedelta | None = None,
    keep_for: Mapping[str, dt.timedelta] | None = None,
    forgotten: Mapping[str, str] | None = None,
    archive_dir: Path | None = None,
    batch: int = PRUNE_BATCH,
) -> PruneResult:
    """Delete the events older than ``older_than`` (or of each type of ``keep_for`` older than
    its age), and every event of the streams closed by forget (``forgotten``: the
    ``forget_markers`` of the registry), in ``conn``'s transaction, once no consumer lags
    behind them; with ``archive_dir``, written to ``events-<first>-<last>.jsonl.gz`` there
    first."""
    closed = closed_streams(conn, tables, forgotten or {})
    if older_than is None and not keep_for and not closed:
        return PruneResult(0, 0, None)
    selection = pruned_selection(tables, older_than=older_than, keep_for=keep_for, closed=closed)
    cut = cut_position(conn, tables, selection)
    if cut == 0:
        return PruneResult(0, 0, None)
    check_consumers_past(conn, tables, cut, selection)
    events = tables.events
    archive: Path | None = None
    if archive_dir is not None:
        archive = write_archive(conn, tables, archive_dir, selection, cut, batch)
    pruned = conn.execute(delete(events).where(events.c.id <= cut, selection)).rowcount or 0
    for stream in closed:
        # A snapshot of a stream without events would outlive what it was folded from.
        discard_snapshots(conn, tables, tenant_id=stream.tenant_id, stream_id=stream.stream_id)
    return PruneResult(cut, int(pruned), archive, len(closed))


def declared_retention(registry: Registry) -> dict[str, dt.timedelta]:
    """Event type -> ``keep_for``, for the types that declare one."""
    return {event.qn: event.keep_for for event in registry.events if event.keep_for is not None}


def archived_rows(
    conn: Connection, tables: Tables, selection: ColumnElement[bool], cut: int, batch: int
) -> Iterator[dict[str, Any]]:
    """The events ``selection`` takes up to ``cut``, as an archive stores them, oldest
    first."""
    events = tables.events
    after = 0
    while True:
        query = (
            select(*(events.c[name] for name in ARCHIVED_COLUMNS))
            .where(events.c.id > after, events.c.id <= cut, selection)
            .order_by(events.c.id)
            .limit(batch)
        )
        rows = [dict(row) for row in conn.execute(query).mappings()]
        if not rows:
            return
        for row in rows:
            row["created_at"] = row["created_at"].astimezone(dt.UTC).isoformat()
            yield row
        after = rows[-1]["id"]


def write_archive(
    conn: Connection,
    tables: Tables,
    folder: Path,
    selection: ColumnElement[bool],
    cut: int,
    batch: int,
) -> Path:
    """Write the events ``archived_rows`` gives to a new archive file in ``folder``; its
    path."""
    folder.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    first = last = 0
    # mtime=0 and no file name in the header: the same events give the same bytes.
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0, filename="") as packed:
        for row in archived_rows(conn, tables, selection, cut, batch):
            first = first or row["id"]
            last = row["id"]
            packed.write(_ENCODER.encode(row).encode() + b"\n")
    path = folder / f"events-{first:012d}-{last:012d}.jsonl.gz"
    path.write_bytes(buffer.getvalue())
    return path


def restore_archive(conn: Connection, tables: Tables, path: Path, batch: int = PRUNE_BATCH) -> int:
    """Insert the events of an archive again, with their positions (each must be absent);
    how many."""
    events = tables.events
    restored = 0
    pending: list[dict[str, Any]] = []
    with gzip.open(path, "rb") as packed:
        for line in packed:
            row = json.loads(line)
            row["created_at"] = dt.datetime.fromisoformat(row["created_at"])
            pending.append(row)
            if len(pending) == batch:
                conn.execute(insert(events), pending)
                restored += len(pending)
                pending = []
    if pending:
        conn.execute(insert(events), pending)
        restored += len(pending)
    return restored
