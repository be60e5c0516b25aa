"""Snapshot rows: an aggregate's state kept at a stream version, so that a load folds only
the events after it.

The rows hold what the caller gives them; ``service/aggregates.py`` seals the personal values
of a state before it is kept and opens them when it is read back.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Select, bindparam, delete, select

from asanoha.platform.store.backends import Backend
from asanoha.platform.store.tables import Tables


@dataclass(frozen=True)
class Snapshot:
    """A kept state: the stream version and global position of the last event in it."""

    stream_version: int
    position: int
    aggregate_version: str
    state: Any


def latest_snapshot(
    conn: Connection,
    tables: Tables,
    *,
    tenant_id: str,
    aggregate: str,
    stream_id: str,
    through_version: int | None = None,
) -> Snapshot | None:
    """The newest snapshot of the stream (at most at ``through_version``), whatever its
    aggregate version: the caller decides whether it can use it."""
    parameters: dict[str, Any] = {
        "latest_tenant_id": tenant_id,
        "latest_aggregate": aggregate,
        "latest_stream_id": stream_id,
    }
    if through_version is None:
        query = tables.built(_latest_query)
    else:
        query = tables.built(_latest_query_through)
        parameters["latest_through_version"] = through_version
    row = conn.execute(query, parameters).first()
    if row is None:
        return None
    return Snapshot(int(row[0]), int(row[1]), str(row[2]), row[3])


def _latest_query(tables: Tables) -> Select[Any]:
    """``latest_snapshot``'s statement (built once: every snapshotted load sends it)."""
    table = tables.snapshots
    return (
        select(table.c.stream_version, table.c.position, table.c.aggregate_version, table.c.state)
        .where(
            table.c.tenant_id == bindparam("latest_tenant_id"),
            table.c.aggregate == bindparam("latest_aggregate"),
            table.c.stream_id == bindparam("latest_stream_id"),
        )
        .order_by(table.c.stream_version.desc())
        .limit(1)
    )


def _latest_query_through(tables: Tables) -> Select[Any]:
    """``latest_snapshot``'s statement with a last stream version (``as_of``)."""
    table = tables.snapshots
    return _latest_query(tables).where(
        table.c.stream_version <= bindparam("latest_through_version")
    )


def save_snapshot(
    conn: Connection,
    backend: Backend,
    tables: Tables,
    *,
    tenant_id: str,
    aggregate: str,
    stream_id: str,
    snapshot: Snapshot,
) -> bool:
    """Keep ``snapshot`` unless the stream has one at that version already (a concurrent
    load took it: both folded the same events); whether it was kept."""
    row = {
        "tenant_id": tenant_id,
        "aggregate": aggregate,
        "stream_id": stream_id,
        "stream_version": snapshot.stream_version,
        "aggregate_version": snapshot.aggregate_version,
        "position": snapshot.position,
        "state": snapshot.state,
        "created_at": dt.datetime.now(dt.UTC),
    }
    return backend.insert_unless_exists(conn, tables.snapshots, row) is not None


def discard_snapshots(
    conn: Connection,
    tables: Tables,
    *,
    tenant_id: str,
    stream_id: str,
    aggregate: str | None = None,
    from_version: int | None = None,
) -> int:
    """Delete the stream's snapshots (of one ``aggregate``; at ``from_version`` and above);
    how many."""
    table = tables.snapshots
    statement = delete(table).where(table.c.tenant_id == tenant_id, table.c.stream_id == stream_id)
    if aggregate is not None:
        statement = statement.where(table.c.aggregate == aggregate)
    if from_version is not None:
        statement = statement.where(table.c.stream_version >= from_version)
    return int(conn.execute(statement).rowcount or 0)
