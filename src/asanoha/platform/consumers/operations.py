"""Operations on consumers: status with lag, restart, skip, disable, enable.

One rule for all of them: ``restart`` and ``skip`` act on the event a consumer is stopped at
(dead there, or waiting for its next attempt) and answer ``consumer_not_stopped`` when it is
stopped at none; ``disable`` and ``enable`` are a switch that leaves that state alone, so a
dead consumer that is disabled and enabled again is still dead at its event until it is
restarted or told to skip it. Restart and skip on a disabled consumer change what it resumes
with; it stays disabled.

A partitioned consumer has a cursor per partition: its status is the sum of theirs (with
each partition's own in ``partitions``), and each operation acts on one ``partition`` or,
without one, on every partition it applies to.

Each runs on the caller's connection (inside its transaction), so the bundled admin
handlers and ``Consumers`` share them.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, and_, func, or_, select

from asanoha.platform.consumers.cursors import (
    ConsumerStatusName,
    Cursor,
    lock_cursor_rows,
    read_cursors,
    save_cursor,
)
from asanoha.platform.consumers.parking import count_parked, count_parked_in, release_parked
from asanoha.platform.errors import ConflictError, NotFoundError, Reasons
from asanoha.platform.store import Tables

#: Gap ranges one lag count looks into.
GAPS_PER_COUNT = 200


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
    #: When the next attempt at ``event_id`` may start (its backoff); ``None`` when it is
    #: not stopped at an event, or dead there.
    next_attempt_at: dt.datetime | None = None
    #: The tenant of ``event_id``.
    event_tenant: str | None = None
    #: Which partition this is (``None``: the consumer as a whole, the sum of its partitions).
    partition: int | None = None
    #: Each partition's own status, for a consumer with more than one.
    partitions: tuple[ConsumerStatus, ...] = ()
    #: Events parked for tenants that switched the consumer's feature off: delivered once
    #: it is on again (see ``parking``).
    parked: int = 0

    @property
    def behind(self) -> bool:
        """Whether a partition that is not disabled has events left to handle."""
        parts = self.partitions or (self,)
        return any(part.lag > 0 and part.status != "disabled" for part in parts)

    def waiting(self, now: dt.datetime) -> bool:
        """Whether it is stopped at an event whose next attempt is not due at ``now``."""
        return self.next_attempt_at is not None and self.next_attempt_at > now


def count_lag(
    conn: Connection,
    tables: Tables,
    cursor: Cursor,
    types: Sequence[str],
    *,
    tenant_id: str | None = None,
) -> int:
    """Committed events of ``types`` (of ``tenant_id``, if given) the cursor has not handled."""
    events = tables.events
    # The gaps lie below the position and do not overlap: one count each for a bounded
    # number of ranges (SQLite limits an expression's depth; a repartition can leave many).
    lag = 0
    pieces: list[Any] = [events.c.id > cursor.position]
    for start in range(0, len(cursor.gaps), GAPS_PER_COUNT):
        chunk = cursor.gaps[start : start + GAPS_PER_COUNT]
        pieces.append(
            or_(*(and_(events.c.id >= gap.first, events.c.id <= gap.last) for gap in chunk))
        )
    for behind in pieces:
        query = select(func.count()).select_from(events).where(events.c.type.in_(types), behind)
        if cursor.partitions > 1:
            query = query.where(events.c.partition_key % cursor.partitions == cursor.partition)
        if tenant_id is not None:
            query = query.where(events.c.tenant_id == tenant_id)
        lag += int(conn.execute(query).scalar_one())
    return lag


def consumer_statuses(
    conn: Connection,
    tables: Tables,
    names: Sequence[str] | None = None,
    *,
    tenant_id: str | None = None,
) -> list[ConsumerStatus]:
    """Position, lag, status, attempts and last error of the consumers ``names`` (default:
    every registered one), in that order.

    With ``tenant_id`` it is that tenant's view: the lag counts its events only, and the event
    a consumer is stopped at (its id, attempts, error and tenant) shows only when it is one of
    that tenant's events.
    """
    cursors = read_cursors(conn, tables, names)
    order = list(cursors) if names is None else [name for name in names if name in cursors]
    parked = count_parked(conn, tables, order, tenant_id=tenant_id)
    return [_summed(conn, tables, cursors[name], tenant_id, parked.get(name, 0)) for name in order]


def _summed(
    conn: Connection,
    tables: Tables,
    cursors: Sequence[Cursor],
    tenant_id: str | None,
    parked: int,
) -> ConsumerStatus:
    """One partition's status as it is, or the sum of several: the lowest position, the lag,
    gaps and parked events added up, dead when one is dead, disabled when all are, and the
    first event a partition is stopped at."""
    if len(cursors) == 1:
        return dataclasses.replace(_status(conn, tables, cursors[0], tenant_id), parked=parked)
    parts = tuple(_status(conn, tables, cursor, tenant_id) for cursor in cursors)
    if parked:
        # Which partitions hold them: counted only when some are parked at all.
        parts = tuple(
            dataclasses.replace(
                part, parked=count_parked_in(conn, tables, cursor, tenant_id=tenant_id)
            )
            for part, cursor in zip(parts, cursors, strict=True)
        )
    states = {part.status for part in parts}
    status: ConsumerStatusName = (
        "dead" if "dead" in states else "disabled" if states == {"disabled"} else "idle"
    )
    stopped = [part for part in parts if part.event_id is not None]
    first = min(stopped, key=lambda part: part.event_id or 0) if stopped else None
    return ConsumerStatus(
        name=parts[0].name,
        position=min(part.position for part in parts),
        lag=sum(part.lag for part in parts),
        status=status,
        attempts=0 if first is None else first.attempts,
        event_id=None if first is None else first.event_id,
        last_error=None if first is None else first.last_error,
        gaps=sum(part.gaps for part in parts),
        next_attempt_at=None if first is None else first.next_attempt_at,
        event_tenant=None if first is None else first.event_tenant,
        partitions=parts,
        parked=parked,
    )


def _status(
    conn: Connection, tables: Tables, cursor: Cursor, tenant_id: str | None
) -> ConsumerStatus:
    event_tenant = None
    if cursor.event_id is not None:
        events = tables.events
        query = select(events.c.tenant_id).where(events.c.id == cursor.event_id)
        event_tenant = conn.execute(query).scalar()
    status = ConsumerStatus(
        name=cursor.name,
        position=cursor.position,
        lag=count_lag(conn, tables, cursor, cursor.types, tenant_id=tenant_id),
        status=cursor.status,
        attempts=cursor.attempts,
        event_id=cursor.event_id,
        last_error=cursor.last_error,
        gaps=cursor.gap_ids,
        next_attempt_at=cursor.retry_at if cursor.event_id is not None else None,
        event_tenant=event_tenant,
        partition=cursor.partition if cursor.partitions > 1 else None,
    )
    if tenant_id is not None and event_tenant != tenant_id:
        # Another tenant's event: its id and error text are not this tenant's to read.
        status = dataclasses.replace(
            status, attempts=0, event_id=None, last_error=None, event_tenant=None
        )
    return status


def restart_consumer(
    conn: Connection, tables: Tables, name: str, partition: int | None = None
) -> None:
    """Let a consumer stopped at an event (dead, or waiting for its next attempt) try it
    again at once, with a fresh count of attempts (every stopped partition, or ``partition``)."""
    for cursor in _stopped(conn, tables, name, partition):
        save_cursor(
            conn,
            tables,
            name,
            partition=cursor.partition,
            attempts=0,
            retry_at=None,
            **_resumed(cursor),
        )


def skip_event(conn: Connection, tables: Tables, name: str, partition: int | None = None) -> int:
    """Move a consumer past the event it is stopped at; return that event's id.

    Without ``partition``, every stopped partition skips its event (the lowest id is
    returned). The skip is recorded on the cursor row (``skipped``) with the error it had.
    """
    skipped = [
        _skip(conn, tables, name, cursor) for cursor in _stopped(conn, tables, name, partition)
    ]
    return min(skipped)


def _skip(conn: Connection, tables: Tables, name: str, cursor: Cursor) -> int:
    event_id = cursor.event_id
    assert event_id is not None
    if any(event_id in gap for gap in cursor.gaps):
        # It was delivered late: the position is past it already.
        gaps = tuple(part for gap in cursor.gaps for part in gap.without([event_id]))
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
        partition=cursor.partition,
        position=position,
        gaps=gaps,
        attempts=0,
        event_id=None,
        last_error=None,
        retry_at=None,
        skipped=[*cursor.skipped, record],
        **_resumed(cursor),
    )
    # A parked event the consumer stopped at is delivered no more.
    release_parked(conn, tables, name, event_id)
    return event_id


def disable_consumer(
    conn: Connection, tables: Tables, name: str, partition: int | None = None
) -> None:
    """Stop delivering to a consumer (every partition, or ``partition``) until it is enabled;
    its position, and the event it is stopped at, stay."""
    for cursor in _locked(conn, tables, name, partition):
        if cursor.status != "disabled":
            resume = "dead" if cursor.status == "dead" else None
            save_cursor(
                conn,
                tables,
                name,
                partition=cursor.partition,
                status="disabled",
                resume_status=resume,
            )


def enable_consumer(
    conn: Connection, tables: Tables, name: str, partition: int | None = None
) -> None:
    """Resume a disabled consumer (every partition, or ``partition``) as it was: one disabled
    while dead is dead again (restart or skip it)."""
    for cursor in _locked(conn, tables, name, partition):
        if cursor.status == "disabled":
            save_cursor(
                conn,
                tables,
                name,
                partition=cursor.partition,
                status=cursor.resume_status or "idle",
                resume_status=None,
            )


def _resumed(cursor: Cursor) -> dict[str, object]:
    """The status change of a restart or skip: a dead consumer is idle again; a disabled one
    stays disabled and resumes idle."""
    if cursor.status == "disabled":
        return {"resume_status": None}
    return {"status": "idle"}


def _stopped(conn: Connection, tables: Tables, name: str, partition: int | None) -> list[Cursor]:
    """The locked cursors (of ``partition``, or all) that are stopped at an event; at least
    one."""
    cursors = _locked(conn, tables, name, partition)
    stopped = [cursor for cursor in cursors if cursor.event_id is not None]
    if not stopped:
        raise ConflictError(Reasons.CONSUMER_NOT_STOPPED, consumer=name, status=cursors[0].status)
    return stopped


def _locked(conn: Connection, tables: Tables, name: str, partition: int | None) -> list[Cursor]:
    """Every partition's cursor of ``name`` (or ``partition``'s), locked."""
    # Waits for running passes, so an operation never interleaves with a delivery.
    cursors = lock_cursor_rows(conn, tables, name)
    if not cursors:
        raise NotFoundError(Reasons.CONSUMER_NOT_FOUND, consumer=name)
    if partition is None:
        return cursors
    found = [cursor for cursor in cursors if cursor.partition == partition]
    if not found:
        raise NotFoundError(
            Reasons.CONSUMER_PARTITION_NOT_FOUND,
            consumer=name,
            partition=partition,
            partitions=len(cursors),
        )
    return found


#: ``operation(conn, tables, name, partition)``: restart, disable or enable.
Operation = Callable[[Connection, Tables, str, int | None], None]
