"""Append events to a stream with an expected version, and read them back in order."""

from __future__ import annotations

import datetime as dt
import zlib
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from sqlalchemy import Connection, Select, bindparam, func, select

from asanoha.platform import telemetry
from asanoha.platform.errors import InternalError, Reasons, VersionConflictError
from asanoha.platform.personal import events as personal_events
from asanoha.platform.personal import secret_values
from asanoha.platform.store.backends import Backend
from asanoha.platform.store.tables import Tables


@dataclass(frozen=True)
class StoredEvent:
    """An event as the store keeps it; ``id`` is its global position."""

    id: int
    stream_id: str
    stream_type: str
    tenant_id: str
    version: int
    type: str
    schema_version: int
    payload: dict[str, Any]
    metadata: dict[str, Any]
    created_at: dt.datetime
    created_by: str


def stream_version(conn: Connection, tables: Tables, tenant_id: str, stream_id: str) -> int:
    """The version of the newest event of a stream, 0 for a stream without events."""
    events = tables.events
    query = select(func.coalesce(func.max(events.c.version), 0)).where(
        events.c.tenant_id == tenant_id, events.c.stream_id == stream_id
    )
    return int(conn.execute(query).scalar_one())


def partition_key(tenant_id: str, stream_id: str) -> int:
    """The event's partition key: CRC-32 of ``f"{tenant_id}\\x1f{stream_id}"`` (UTF-8), below
    2**31. Stable across processes, versions and databases: a consumer with N partitions
    gives an event to partition ``partition_key % N``, so a stream always goes to one."""
    return zlib.crc32(f"{tenant_id}\x1f{stream_id}".encode()) & 0x7FFFFFFF


def append_event(
    conn: Connection,
    backend: Backend,
    tables: Tables,
    *,
    tenant_id: str,
    stream_id: str,
    stream_type: str,
    expected_version: int,
    type: str,
    payload: Mapping[str, Any],
    metadata: Mapping[str, Any],
    created_by: str,
    schema_version: int = 1,
    new_keys: Sequence[dict[str, Any]] = (),
) -> StoredEvent:
    """Append one event as version ``expected_version + 1`` of its stream.

    Raises ``VersionConflictError`` when that version exists already: a concurrent writer won,
    or the caller read a stale version. ``new_keys``: rows of ``asanoha_subject_keys`` to
    insert with the event (the last one in the same statement); ``SubjectKeyExists`` when
    a subject has one already.
    """
    if secret_values.carries_secret(payload):
        # An event is kept for ever and read by every consumer: a secret in it (outside a
        # sealed personal field) would be stored in plain text. Refused before anything is.
        raise InternalError(Reasons.SECRET_IN_OUTPUT, handler=type)
    now = dt.datetime.now(dt.UTC)
    row = {
        "stream_id": stream_id,
        "stream_type": stream_type,
        "tenant_id": tenant_id,
        "version": expected_version + 1,
        "type": type,
        "schema_version": schema_version,
        "payload": dict(payload),
        "metadata": dict(metadata),
        "created_at": now,
        "created_by": created_by,
    }
    with telemetry.event_span(type, stream_id) as span:
        keyed = {**row, "partition_key": partition_key(tenant_id, stream_id)}
        if not new_keys:
            event_id = backend.insert_unless_exists(conn, tables.events, keyed)
        else:
            event_id = _insert_with_keys(conn, backend, tables, keyed, new_keys)
        if event_id is None:
            raise VersionConflictError(
                stream_id=stream_id,
                expected_version=expected_version,
                current_version=stream_version(conn, tables, tenant_id, stream_id),
            )
        span.set("event.position", int(event_id))
    return StoredEvent(id=int(event_id), **row)  # type: ignore[arg-type]


class SubjectKeyExists(Exception):
    """A key row could not be made: its subject has one (or a forgotten one) already."""

    def __init__(self, tenant_id: str, subject: str) -> None:
        super().__init__(f"subject {subject!r} of tenant {tenant_id!r} has a key row already")
        self.tenant_id = tenant_id
        self.subject = subject


def _insert_with_keys(
    conn: Connection,
    backend: Backend,
    tables: Tables,
    event: dict[str, Any],
    new_keys: Sequence[dict[str, Any]],
) -> Any:
    """The event's id (``None``: its version exists), its subjects' key rows inserted too."""
    *before, last = new_keys
    for key_row in before:
        if backend.insert_unless_exists(conn, tables.subject_keys, key_row) is None:
            raise SubjectKeyExists(key_row["tenant_id"], key_row["subject"])
    event_id, made = backend.insert_pair_unless_exists(
        conn, tables.events, event, tables.subject_keys, last
    )
    if event_id is not None and not made:
        raise SubjectKeyExists(last["tenant_id"], last["subject"])
    return event_id


def read_events(
    conn: Connection,
    tables: Tables,
    *,
    after: int = 0,
    limit: int = 1000,
    types: Collection[str] | None = None,
    stream_id: str | None = None,
    tenant_id: str | None = None,
    upcast: bool = True,
    opened: bool = True,
) -> list[StoredEvent]:
    """Events with a position above ``after``, oldest first, in the newest shape of their
    type (``upcast=False``: as stored, for code that rewrites stored payloads), with their
    personal values opened as consumers get them (``FORGOTTEN`` once forgotten;
    ``opened=False``: sealed, for code that stores them again, such as a rebuild)."""
    events = tables.events
    query = select(*(events.c[name] for name in EVENT_COLUMNS)).where(events.c.id > after)
    if types is not None:
        query = query.where(events.c.type.in_(list(types)))
    if stream_id is not None:
        query = query.where(events.c.stream_id == stream_id)
    if tenant_id is not None:
        query = query.where(events.c.tenant_id == tenant_id)
    found = _stored_events(conn.execute(query.order_by(events.c.id).limit(limit)).all())
    if upcast:
        found = tables.upcasters.upcast_all(found)
    return personal_events.reveal_events(conn, found) if opened else found


def read_stream(
    conn: Connection,
    tables: Tables,
    *,
    tenant_id: str,
    stream_id: str,
    after_version: int = 0,
    through_version: int | None = None,
) -> list[StoredEvent]:
    """The events of one stream with a version above ``after_version`` (and at most
    ``through_version``), in order, upcast and opened as ``read_events`` gives them."""
    parameters: dict[str, Any] = {
        "read_tenant_id": tenant_id,
        "read_stream_id": stream_id,
        "read_after_version": after_version,
    }
    if through_version is None:
        query = tables.built(_stream_query)
    else:
        query = tables.built(_stream_query_through)
        parameters["read_through_version"] = through_version
    found = tables.upcasters.upcast_all(_stored_events(conn.execute(query, parameters).all()))
    return personal_events.reveal_events(conn, found)


def _stream_query(tables: Tables) -> Select[Any]:
    """``read_stream``'s statement (built once: a snapshot's load is a short read)."""
    events = tables.events
    return (
        select(*(events.c[name] for name in EVENT_COLUMNS))
        .where(
            events.c.tenant_id == bindparam("read_tenant_id"),
            events.c.stream_id == bindparam("read_stream_id"),
            events.c.version > bindparam("read_after_version"),
        )
        .order_by(events.c.version)
    )


def _stream_query_through(tables: Tables) -> Select[Any]:
    """``read_stream``'s statement with a last version (``as_of``)."""
    version = tables.events.c.version
    return _stream_query(tables).where(version <= bindparam("read_through_version"))


def stream_version_as_of(
    conn: Connection,
    tables: Tables,
    tenant_id: str,
    stream_id: str,
    as_of: int | dt.datetime,
) -> int:
    """The version a stream had at global position ``as_of`` (an event id), or at the time
    ``as_of`` (an aware datetime); 0 when it had no event yet."""
    events = tables.events
    query = select(func.coalesce(func.max(events.c.version), 0)).where(
        events.c.tenant_id == tenant_id, events.c.stream_id == stream_id
    )
    if isinstance(as_of, dt.datetime):
        query = query.where(events.c.created_at <= as_of)
    else:
        query = query.where(events.c.id <= as_of)
    return int(conn.execute(query).scalar_one())


def read_event(
    conn: Connection, tables: Tables, event_id: int, *, opened: bool = True
) -> StoredEvent | None:
    """The event at position ``event_id`` in the newest shape of its type, or ``None``;
    its personal values opened as ``read_events`` opens them."""
    events = tables.events
    query = select(*(events.c[name] for name in EVENT_COLUMNS)).where(events.c.id == event_id)
    row = conn.execute(query).first()
    if row is None:
        return None
    found = tables.upcasters.upcast(StoredEvent(*row))
    return personal_events.reveal_event(conn, found) if opened else found


def _stored_events(rows: Iterable[Sequence[Any]]) -> list[StoredEvent]:
    """Rows of ``EVENT_COLUMNS`` as events: by position, which costs less per row than by
    name (a full fold reads every event of its stream)."""
    return [StoredEvent(*row) for row in rows]


#: The event columns, in ``StoredEvent``'s field order.
EVENT_COLUMNS = tuple(field.name for field in fields(StoredEvent))
