"""Cursor rows in ``asanoha_consumers``: one per consumer, read and written inside a pass."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from sqlalchemy import Connection, func, select, update

from asanoha.platform.model import ConsumerDef
from asanoha.platform.store import Backend, Tables

ConsumerStatusName = Literal["idle", "dead", "disabled"]
#: Longest error text kept on a cursor row.
MAX_ERROR_LENGTH = 2000


@dataclass(frozen=True)
class Gap:
    """An event id below the position that was not visible when the consumer passed it.

    Its writer may still commit it (then it is delivered late) or may have rolled back (then
    the id never appears). ``bound`` is a transaction id above every transaction that could
    hold the id, or ``None`` until the next pass has drawn one (see ``visibility``).
    """

    id: int
    bound: int | None = None


@dataclass(frozen=True)
class Cursor:
    """A consumer's row as a pass locked it."""

    name: str
    position: int
    gaps: tuple[Gap, ...]
    status: ConsumerStatusName
    attempts: int
    event_id: int | None
    last_error: str | None
    #: The event types it follows, as registered.
    types: tuple[str, ...] = ()
    #: The locking transaction's id (Postgres); ``None`` on SQLite.
    xid: int | None = None
    skipped: tuple[dict[str, Any], ...] = field(default=())


def gaps_from_json(value: Any) -> tuple[Gap, ...]:
    """Gaps as stored: ``[[id, bound-or-null], ...]``."""
    return tuple(
        Gap(int(item[0]), None if item[1] is None else int(item[1])) for item in value or ()
    )


def gaps_to_json(gaps: Iterable[Gap]) -> list[list[int | None]]:
    """The stored form of ``gaps``."""
    return [[gap.id, gap.bound] for gap in gaps]


def cursor_from_row(row: Any, xid: int | None = None) -> Cursor:
    """A ``Cursor`` from a selected ``asanoha_consumers`` row (a mapping)."""
    return Cursor(
        name=row["name"],
        position=int(row["position"]),
        gaps=gaps_from_json(row["gaps"]),
        status=row["status"],
        attempts=int(row["attempts"]),
        event_id=None if row["event_id"] is None else int(row["event_id"]),
        last_error=row["last_error"],
        types=tuple(row["types"] or ()),
        xid=xid,
        skipped=tuple(row["skipped"] or ()),
    )


def read_cursors(
    conn: Connection, tables: Tables, names: Sequence[str] | None = None
) -> dict[str, Cursor]:
    """The cursor rows of ``names`` (default: all), unlocked, by name (for status and lag)."""
    consumers = tables.consumers
    query = select(consumers).order_by(consumers.c.name)
    if names is not None:
        query = query.where(consumers.c.name.in_(list(names)))
    return {row["name"]: cursor_from_row(row) for row in conn.execute(query).mappings()}


def lock_cursor_row(
    conn: Connection, tables: Tables, name: str, *, skip_locked: bool
) -> Cursor | None:
    """Lock a cursor row (``FOR UPDATE``); ``None`` when it is missing, or locked by another
    transaction and ``skip_locked``. For operations; a pass locks through the visibility seam."""
    consumers = tables.consumers
    query = select(consumers).where(consumers.c.name == name)
    query = query.with_for_update(skip_locked=skip_locked)
    row = conn.execute(query).mappings().first()
    return None if row is None else cursor_from_row(row)


def save_cursor(conn: Connection, tables: Tables, name: str, **values: Any) -> None:
    """Update the cursor row ``name``; ``gaps`` may be given as ``Gap`` values."""
    if "gaps" in values:
        values["gaps"] = gaps_to_json(values["gaps"])
    consumers = tables.consumers
    conn.execute(
        update(consumers)
        .where(consumers.c.name == name)
        .values(**values, updated_at=dt.datetime.now(dt.UTC))
    )


def register_cursors(
    conn: Connection, backend: Backend, tables: Tables, definitions: Iterable[ConsumerDef]
) -> list[str]:
    """Insert the missing cursor rows and bring the event types of existing ones in step with
    their definitions; return the names inserted.

    A new consumer starts before the first event, or with ``start="now"`` at the newest one.
    A row that exists keeps its position (a redeploy does not replay or skip anything).
    """
    consumers, events = tables.consumers, tables.events
    wanted = {definition.qn: definition for definition in definitions}
    query = select(consumers.c.name, consumers.c.types).where(consumers.c.name.in_(list(wanted)))
    existing = {row.name: list(row.types or ()) for row in conn.execute(query)}
    head: int | None = None
    created: list[str] = []
    for name, definition in wanted.items():
        types = list(definition.on)
        if name in existing:
            if existing[name] != types:
                save_cursor(conn, tables, name, types=types)
            continue
        position = 0
        if definition.start == "now":
            if head is None:
                head = int(
                    conn.execute(select(func.coalesce(func.max(events.c.id), 0))).scalar_one()
                )
            position = head
        row = {
            "name": name,
            "position": position,
            "gaps": [],
            "types": types,
            "status": "idle",
            "attempts": 0,
            "skipped": [],
            "updated_at": dt.datetime.now(dt.UTC),
        }
        if backend.insert_unless_exists(conn, tables.consumers, row) is not None:
            created.append(name)
    return created


def describe_error(exc: BaseException) -> str:
    """The error text kept on the cursor row: type and message, bounded, without NUL."""
    text = f"{type(exc).__name__}: {exc}".replace("\x00", "")
    return text if len(text) <= MAX_ERROR_LENGTH else text[: MAX_ERROR_LENGTH - 1] + "…"
