"""Changing a consumer's number of partitions without losing or repeating an event.

The consumer stops at a common position, in one transaction: every partition's row is locked
(waiting for the passes running on them), and the new partitions all start at the furthest
position any old one had reached. What an old partition had not handled below it is carried
over as gaps: its own gaps, and the ids between its position and the common one, less the
ids that are visible and not its business (another partition's events, or of a type the
consumer does not follow). Every id left is either an event of that partition not delivered
yet, or not visible (still being written, or never to appear). A new partition delivers the
visible ones of its own (in id order, before anything past the common position, so a stream
stays in order) and treats the rest as any gap (see ``visibility``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from sqlalchemy import Connection, delete, select

from asanoha.platform.consumers.cursors import (
    Cursor,
    Gap,
    gaps_to_json,
    lock_cursor_rows,
    save_cursor,
)
from asanoha.platform.errors import ConflictError, NotFoundError, Reasons
from asanoha.platform.store import Backend, Tables


def repartition_consumer(
    conn: Connection, backend: Backend, tables: Tables, name: str, partitions: int
) -> int:
    """Give the consumer ``name`` ``partitions`` cursors; return how many it had.

    ``ConflictError`` (``consumer_stopped``) when a partition is stopped at a failing event
    (restart or skip it first). A disabled consumer stays disabled.
    """
    if partitions < 1:
        raise ValueError(f"partitions must be >= 1, not {partitions}")
    cursors = lock_cursor_rows(conn, tables, name)
    if not cursors:
        raise NotFoundError(Reasons.CONSUMER_NOT_FOUND, consumer=name)
    before = len(cursors)
    for cursor in cursors:
        if cursor.event_id is not None:
            raise ConflictError(
                Reasons.CONSUMER_STOPPED,
                consumer=name,
                event_id=cursor.event_id,
                partition=cursor.partition,
            )
    if before == partitions:
        return before
    position = max(cursor.position for cursor in cursors)
    keeps_invisible = conn.dialect.name == "postgresql"
    pending: list[Gap] = []
    for cursor in cursors:
        pending += _pending(conn, tables, cursor, position, keeps_invisible=keeps_invisible)
    gaps = _union(pending)
    disabled = all(cursor.status == "disabled" for cursor in cursors)
    skipped = [record for cursor in cursors for record in cursor.skipped]
    now = dt.datetime.now(dt.UTC)
    state = {
        "partitions": partitions,
        "position": position,
        "status": "disabled" if disabled else "idle",
        "resume_status": None,
        "attempts": 0,
        "event_id": None,
        "last_error": None,
        "retry_at": None,
    }
    consumers = tables.consumers
    conn.execute(
        delete(consumers).where(consumers.c.name == name, consumers.c.partition >= partitions)
    )
    for partition in range(partitions):
        # The skips recorded on any old row are kept on partition 0.
        kept = skipped if partition == 0 else []
        if partition < before:
            save_cursor(conn, tables, name, partition=partition, gaps=gaps, skipped=kept, **state)
            continue
        row = {
            "name": name,
            "partition": partition,
            "types": list(cursors[0].types),
            "gaps": gaps_to_json(gaps),
            "skipped": kept,
            "updated_at": now,
            **state,
        }
        backend.insert_unless_exists(conn, consumers, row)
    return before


def _pending(
    conn: Connection, tables: Tables, cursor: Cursor, position: int, *, keeps_invisible: bool
) -> list[Gap]:
    """The ids at or below ``position`` that ``cursor`` has not handled and that may still
    be its business, as ranges."""
    ranges = list(cursor.gaps)
    if cursor.position < position:
        # Not looked at yet: bound None, so the next pass draws one (as for start="now").
        ranges.append(Gap(cursor.position + 1, position))
    found: list[Gap] = []
    events = tables.events
    wanted = frozenset(cursor.types)
    for gap in ranges:
        rows = conn.execute(
            select(events.c.id, events.c.type, events.c.partition_key)
            .where(events.c.id.between(gap.first, gap.last))
            .order_by(events.c.id)
        ).all()
        if not keeps_invisible:
            # SQLite: no writer runs now, so an id that is not visible never appears.
            found += [
                Gap(int(row.id), int(row.id))
                for row in rows
                if row.type in wanted and cursor.owns(int(row.partition_key))
            ]
            continue
        others = [
            int(row.id)
            for row in rows
            if row.type not in wanted or not cursor.owns(int(row.partition_key))
        ]
        found += gap.without(others)
    return found


def _union(gaps: Iterable[Gap]) -> tuple[Gap, ...]:
    """``gaps`` as sorted ranges that neither overlap nor touch; a merged range takes the
    highest bound of its parts (any of them is a valid bound; ``None``: drawn next pass)."""
    merged: list[Gap] = []
    for gap in sorted(gaps, key=lambda gap: gap.first):
        if merged and gap.first <= merged[-1].last + 1:
            last = merged[-1]
            merged[-1] = Gap(last.first, max(last.last, gap.last), _higher(last.bound, gap.bound))
        else:
            merged.append(gap)
    return tuple(merged)


def _higher(a: int | None, b: int | None) -> int | None:
    if a is None or b is None:
        return None
    return max(a, b)
