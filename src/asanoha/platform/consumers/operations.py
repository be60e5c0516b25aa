"""Operations on consumers: status with lag, restart, skip, disable, enable.

Each runs on the caller's connection (inside its transaction), so the bundled admin
handlers and ``Consumers`` share them.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, func, or_, select

from asanoha.platform.consumers.cursors import (
    ConsumerStatusName,
    Cursor,
    lock_cursor_row,
    read_cursors,
    save_cursor,
)
from asanoha.platform.errors import ConflictError, NotFoundError, Reasons
from asanoha.platform.store import Tables


@dataclass(frozen=True)
class ConsumerStatus:
    """A consumer as ``status()`` reports it."""

    name: str
    position: int
    #: Committed events of its types it has not handled yet.
    lag: int
    status: ConsumerStatusName
    #: Failed attempts at ``event_id``.
    attempts: int
    #: The event the consumer is stopped at after a failure, else ``None``.
    event_id: int | None
    last_error: str | None
    #: Ids below the position still waiting for their writer (Postgres).
    gaps: int = 0


def count_lag(conn: Connection, tables: Tables, cursor: Cursor, types: Sequence[str]) -> int:
    """Committed events of ``types`` the cursor has not handled."""
    events = tables.events
    behind = events.c.id > cursor.position
    if cursor.gaps:
        behind = or_(behind, events.c.id.in_([gap.id for gap in cursor.gaps]))
    query = select(func.count()).select_from(events).where(events.c.type.in_(types), behind)
    return int(conn.execute(query).scalar_one())


def consumer_statuses(
    conn: Connection, tables: Tables, names: Sequence[str] | None = None
) -> list[ConsumerStatus]:
    """Position, lag, status, attempts and last error of the consumers ``names`` (default:
    every registered one), in that order."""
    cursors = read_cursors(conn, tables, names)
    order = list(cursors) if names is None else [name for name in names if name in cursors]
    return [_status(conn, tables, cursors[name]) for name in order]


def _status(conn: Connection, tables: Tables, cursor: Cursor) -> ConsumerStatus:
    return ConsumerStatus(
        name=cursor.name,
        position=cursor.position,
        lag=count_lag(conn, tables, cursor, cursor.types),
        status=cursor.status,
        attempts=cursor.attempts,
        event_id=cursor.event_id,
        last_error=cursor.last_error,
        gaps=len(cursor.gaps),
    )


def restart_consumer(conn: Connection, tables: Tables, name: str) -> None:
    """Let a dead consumer try its failing event again, with a fresh count of attempts."""
    cursor = _locked(conn, tables, name)
    if cursor.status == "dead":
        save_cursor(conn, tables, name, status="idle", attempts=0)


def skip_event(conn: Connection, tables: Tables, name: str) -> int:
    """Move a consumer past the event it is stopped at; return that event's id.

    The skip is recorded on the cursor row (``skipped``) with the error it had.
    """
    cursor = _locked(conn, tables, name)
    event_id = cursor.event_id
    if event_id is None:
        raise ConflictError(Reasons.CONSUMER_NOT_STOPPED, consumer=name)
    if any(gap.id == event_id for gap in cursor.gaps):
        # It was delivered late: the position is past it already.
        gaps = tuple(gap for gap in cursor.gaps if gap.id != event_id)
        position = cursor.position
    else:
        # A pass stops with its position just below the failing event.
        gaps, position = cursor.gaps, max(cursor.position, event_id)
    record = {
        "event_id": event_id,
        "error": cursor.last_error,
        "at": dt.datetime.now(dt.UTC).isoformat(),
    }
    save_cursor(
        conn,
        tables,
        name,
        position=position,
        gaps=gaps,
        attempts=0,
        event_id=None,
        last_error=None,
        status="idle" if cursor.status == "dead" else cursor.status,
        skipped=[*cursor.skipped, record],
    )
    return event_id


def disable_consumer(conn: Connection, tables: Tables, name: str) -> None:
    """Stop delivering to a consumer until it is enabled; its position stays."""
    _locked(conn, tables, name)
    save_cursor(conn, tables, name, status="disabled")


def enable_consumer(conn: Connection, tables: Tables, name: str) -> None:
    """Resume a disabled consumer. One disabled while dead goes on failing its event until
    its attempts are used up again: restart or skip it instead."""
    cursor = _locked(conn, tables, name)
    if cursor.status == "disabled":
        save_cursor(conn, tables, name, status="idle")


def _locked(conn: Connection, tables: Tables, name: str) -> Cursor:
    # Waits for a running pass, so an operation never interleaves with a delivery.
    cursor = lock_cursor_row(conn, tables, name, skip_locked=False)
    if cursor is None:
        raise NotFoundError(Reasons.CONSUMER_NOT_FOUND, consumer=name)
    return cursor


#: ``operation(conn, tables, name)``: restart, disable or enable.
Operation = Callable[[Connection, Tables, str], None]
