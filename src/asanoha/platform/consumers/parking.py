"""Events a consumer parks for a tenant whose feature is switched off.

A consumer of a toggleable feature does not stop at an event of a tenant that switched the
feature off: every other tenant's events behind it in the partition would wait for as long
as the feature stays off. The pass parks the event instead (a row in
``asanoha_consumer_parked``) and goes on. Once the feature is on again, the partition's next
pass (a wake-up or the workers' tick) delivers the tenant's parked events, oldest first, and
scans for newer events only when none is left (a pass that returns a full batch leaves the
scan to the next one), so the tenant's events still reach the handler in id order. Each
row goes in the transaction that keeps its handler's effects.

A parked event that fails stops the partition like any failing event: the cursor records it
(``event_id``, attempts, backoff), ``restart`` tries it again and ``skip`` releases it.

This module is the table's only writer. The rows carry the event's partition key, so a
partition finds its own after a repartition, and every read joins the events, so a parked
event the store no longer holds (a pruned platform event) is simply gone.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Mapping, Sequence

from sqlalchemy import ColumnElement, Connection, delete, func, insert, literal, select

from asanoha.platform.consumers.cursors import Cursor
from asanoha.platform.store import EVENT_COLUMNS, StoredEvent, Tables


class Parking:
    """The parked events of one cursor (a partition of a consumer), in its pass's
    transaction, which holds the cursor's lock."""

    def __init__(self, conn: Connection, tables: Tables, cursor: Cursor) -> None:
        self._conn = conn
        self._tables = tables
        self._cursor = cursor
        parked = tables.consumer_parked
        query = (
            select(parked.c.tenant_id)
            .distinct()
            .join(tables.events, tables.events.c.id == parked.c.event_id)
            .where(*_of(tables, cursor))
        )
        #: The tenants with parked events in this partition.
        self.tenants: set[str] = set(conn.execute(query).scalars())

    def park(self, event: StoredEvent) -> None:
        """Set ``event`` aside for its tenant (the pass moves its position past it)."""
        parked, events = self._tables.consumer_parked, self._tables.events
        rows = select(
            literal(self._cursor.name),
            events.c.id,
            events.c.tenant_id,
            events.c.partition_key,
            literal(dt.datetime.now(dt.UTC), parked.c.parked_at.type),
        ).where(events.c.id == event.id)
        columns = ["name", "event_id", "tenant_id", "partition_key", "parked_at"]
        self._conn.execute(insert(parked).from_select(columns, rows))

    def due(self, tenants: Collection[str], limit: int) -> list[StoredEvent]:
        """The parked events of ``tenants``, oldest first, at most ``limit`` (as stored:
        the pass upcasts and opens them as it does the events it scans)."""
        if not tenants:
            return []
        parked, events = self._tables.consumer_parked, self._tables.events
        query = (
            select(*(events.c[name] for name in EVENT_COLUMNS))
            .join(parked, parked.c.event_id == events.c.id)
            .where(*_of(self._tables, self._cursor), parked.c.tenant_id.in_(sorted(tenants)))
            .order_by(events.c.id)
            .limit(limit)
        )
        return [StoredEvent(*row) for row in self._conn.execute(query).all()]

    def release(self, event: StoredEvent) -> None:
        """``event`` was delivered: it is parked no more."""
        release_parked(self._conn, self._tables, self._cursor.name, event.id)


def release_parked(conn: Connection, tables: Tables, name: str, event_id: int) -> None:
    """Take ``event_id`` out of ``name``'s parked events (delivered, or skipped by an
    operator); nothing when it is not parked."""
    parked = tables.consumer_parked
    conn.execute(delete(parked).where(parked.c.name == name, parked.c.event_id == event_id))


def count_parked(
    conn: Connection, tables: Tables, names: Sequence[str], *, tenant_id: str | None = None
) -> Mapping[str, int]:
    """How many events each consumer of ``names`` has parked (of ``tenant_id``, if given);
    consumers without any are left out. One statement for all of them."""
    parked = tables.consumer_parked
    query = (
        select(parked.c.name, func.count())
        .join(tables.events, tables.events.c.id == parked.c.event_id)
        .where(parked.c.name.in_(list(names)))
        .group_by(parked.c.name)
    )
    if tenant_id is not None:
        query = query.where(parked.c.tenant_id == tenant_id)
    return {name: int(count) for name, count in conn.execute(query).all()}


def count_parked_in(
    conn: Connection, tables: Tables, cursor: Cursor, *, tenant_id: str | None = None
) -> int:
    """How many events ``cursor``'s partition has parked (of ``tenant_id``, if given)."""
    parked = tables.consumer_parked
    query = (
        select(func.count())
        .select_from(parked)
        .join(tables.events, tables.events.c.id == parked.c.event_id)
        .where(*_of(tables, cursor))
    )
    if tenant_id is not None:
        query = query.where(parked.c.tenant_id == tenant_id)
    return int(conn.execute(query).scalar_one())


def _of(tables: Tables, cursor: Cursor) -> list[ColumnElement[bool]]:
    """The conditions of ``cursor``'s parked rows: its consumer's, of its partition."""
    parked = tables.consumer_parked
    conditions: list[ColumnElement[bool]] = [parked.c.name == cursor.name]
    if cursor.partitions > 1:
        conditions.append(parked.c.partition_key % cursor.partitions == cursor.partition)
    return conditions
