"""Event retention: prune the events older than a cut, optionally into an archive that
``restore_archive`` reads back.

The cut is a global position: the newest event older than the age given; the events older
than the age are pruned (a younger one below the cut stays). Nothing is pruned
while a consumer has not handled every event up to the cut that it follows (its position
below the cut with such an event after it, or a gap at or below the cut): 409
``consumer_lag`` names it. Entity rows and declared projections are kept in the write's
transaction, so they never lag.

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
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, delete, func, insert, select

from asanoha.platform.errors import ConflictError, Reasons
from asanoha.platform.store.tables import Tables

#: Events read, archived and deleted per statement.
PRUNE_BATCH = 5000
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
class PruneResult:
    """What a prune did: the cut position, the events deleted, the archive written."""

    cut: int
    pruned: int
    archive: Path | None


def cut_position(conn: Connection, tables: Tables, before: dt.datetime) -> int:
    """The newest position created before ``before`` (0: none)."""
    events = tables.events
    query = select(func.coalesce(func.max(events.c.id), 0)).where(events.c.created_at < before)
    return int(conn.execute(query).scalar_one())


def check_consumers_past(conn: Connection, tables: Tables, cut: int) -> None:
    """409 ``consumer_lag`` naming the first consumer (partition) that has not handled every
    event up to ``cut`` that it follows."""
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
    for name, partition, partitions, position, gaps, types in rows:
        gap_starts = [int(gap[0]) for gap in gaps or []]
        if any(start <= cut for start in gap_starts):
            raise _lagging(name, partition, int(position), cut)
        if int(position) >= cut or not types:
            continue
        query = select(events.c.id).where(
            events.c.id > position, events.c.id <= cut, events.c.type.in_(list(types))
        )
        if int(partitions) > 1:
            query = query.where(events.c.partition_key % int(partitions) == int(partition))
        if conn.execute(query.limit(1)).first() is not None:
            raise _lagging(name, partition, int(position), cut)


def _lagging(name: str, partition: int, position: int, cut: int) -> ConflictError:
    return ConflictError(
        Reasons.CONSUMER_LAG, consumer=name, partition=partition, position=position, cut=cut
    )


def prune_events(
    conn: Connection,
    tables: Tables,
    *,
    older_than: dt.timedelta,
    archive_dir: Path | None = None,
    batch: int = PRUNE_BATCH,
) -> PruneResult:
    """Delete the events up to the cut of ``older_than`` in ``conn``'s transaction, once no
    consumer lags behind it; with ``archive_dir``, written to
    ``events-<first>-<last>.jsonl.gz`` there first."""
    before = dt.datetime.now(dt.UTC) - older_than
    cut = cut_position(conn, tables, before)
    if cut == 0:
        return PruneResult(0, 0, None)
    check_consumers_past(conn, tables, cut)
    events = tables.events
    archive: Path | None = None
    if archive_dir is not None:
        archive = write_archive(conn, tables, archive_dir, cut, before, batch)
    # A younger event below the cut (its writer's clock, or a long transaction) stays.
    pruned_ones = (events.c.id <= cut, events.c.created_at < before)
    pruned = conn.execute(delete(events).where(*pruned_ones)).rowcount or 0
    return PruneResult(cut, int(pruned), archive)


def archived_rows(
    conn: Connection, tables: Tables, cut: int, before: dt.datetime, batch: int
) -> Iterator[dict[str, Any]]:
    """The events up to ``cut`` created before ``before``, as an archive stores them, oldest
    first."""
    events = tables.events
    after = 0
    while True:
        query = (
            select(*(events.c[name] for name in ARCHIVED_COLUMNS))
            .where(events.c.id > after, events.c.id <= cut, events.c.created_at < before)
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
    conn: Connection, tables: Tables, folder: Path, cut: int, before: dt.datetime, batch: int
) -> Path:
    """Write the events ``archived_rows`` gives to a new archive file in ``folder``; its
    path."""
    folder.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    first = last = 0
    # mtime=0 and no file name in the header: the same events give the same bytes.
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0, filename="") as packed:
        for row in archived_rows(conn, tables, cut, before, batch):
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
