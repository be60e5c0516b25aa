"""Registering cursor rows: one per consumer, inserted when a consumer is first seen."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from sqlalchemy import Connection

from asanoha.platform.consumers.cursors import Cursor, Gap, gaps_to_json, read_cursors, save_cursor
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
    running may commit one of them after the registration). A row that exists keeps its
    position (a redeploy does not replay or skip anything).
    """
    visibility = visibility or visibility_for(conn.dialect.name)
    wanted = {definition.qn: definition for definition in definitions}
    cursors = read_cursors(conn, tables)
    start: tuple[int, tuple[Gap, ...]] | None = None
    created: list[str] = []
    for name, definition in wanted.items():
        types = list(definition.on)
        if name in cursors:
            if list(cursors[name].types) != types:
                save_cursor(conn, tables, name, types=types)
            continue
        position, gaps = 0, tuple[Gap, ...]()
        if definition.start == "now":
            if start is None:
                start = visibility.start_now(conn, tables, _settled_below(cursors.values()))
            position, gaps = start
        row = {
            "name": name,
            "position": position,
            "gaps": gaps_to_json(gaps),
            "types": types,
            "status": "idle",
            "attempts": 0,
            "skipped": [],
            "updated_at": dt.datetime.now(dt.UTC),
        }
        if backend.insert_unless_exists(conn, tables.consumers, row) is not None:
            created.append(name)
    return created


def _settled_below(cursors: Iterable[Cursor]) -> int:
    """An id below which every id is visible or will never appear, from the cursors already
    on the database (each is a checkpoint: below its first gap and up to its position, every
    id was seen or proven gone); 1 without one."""
    floors = [min([cursor.position + 1, *(gap.first for gap in cursor.gaps)]) for cursor in cursors]
    return max(floors, default=1)
