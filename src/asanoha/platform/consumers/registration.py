"""Registering cursor rows: one per partition of a consumer, inserted when a consumer is
first seen."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from sqlalchemy import Connection, update

from asanoha.platform.consumers.cursors import Cursor, Gap, gaps_to_json, read_cursors
from asanoha.platform.consumers.visibility import Visibility, visibility_for
from asanoha.platform.model import ConsumerDef
from asanoha.platform.store import Backend, Tables


def register_cursors(
    conn: Connection,
    backend: Backend,
    tables: Tables,
    definitions: Iterable[ConsumerDef],
    visibility: Visibility | None = None,
) -> list[str]:
    """Insert the missing cursor rows and bring the event types of existing ones in step with
    their definitions; return the names inserted.

    A new consumer starts before the first event, or with ``start="now"`` at the newest
    visible one, with the ids below it that are not visible yet as gaps (a transaction still
    running may commit one of them after the registration); it gets ``partitions`` rows, all
    starting there. A consumer that has rows keeps them, their positions and their number of
    partitions (a redeploy does not replay or skip anything; ``repartition`` changes the
    number).
    """
    visibility = visibility or visibility_for(conn.dialect.name)
    wanted = {definition.qn: definition for definition in definitions}
    cursors = read_cursors(conn, tables)
    start: tuple[int, tuple[Gap, ...]] | None = None
    created: list[str] = []
    for name, definition in wanted.items():
        types = list(definition.on)
        if name in cursors:
            if any(list(cursor.types) != types for cursor in cursors[name]):
                consumers = tables.consumers
                conn.execute(
                    update(consumers)
                    .where(consumers.c.name == name)
                    .values(types=types, updated_at=dt.datetime.now(dt.UTC))
                )
            continue
        position, gaps = 0, tuple[Gap, ...]()
        if definition.start == "now":
            if start is None:
                every = [cursor for rows in cursors.values() for cursor in rows]
                start = visibility.start_now(conn, tables, _settled_below(every))
            position, gaps = start
        for partition in range(definition.partitions):
            row = {
                "name": name,
                "partition": partition,
                "partitions": definition.partitions,
                "position": position,
                "gaps": gaps_to_json(gaps),
                "types": types,
                "status": "idle",
                "attempts": 0,
                "skipped": [],
                "updated_at": dt.datetime.now(dt.UTC),
            }
            inserted = backend.insert_unless_exists(conn, tables.consumers, row) is not None
            if inserted and partition == 0:
                created.append(name)
    return created


def _settled_below(cursors: Iterable[Cursor]) -> int:
    """An id below which every id is visible or will never appear, from the cursors already
    on the database (each is a checkpoint: below its first gap and up to its position, every
    id was seen or proven gone); 1 without one."""
    floors = [min([cursor.position + 1, *(gap.first for gap in cursor.gaps)]) for cursor in cursors]
    return max(floors, default=1)
