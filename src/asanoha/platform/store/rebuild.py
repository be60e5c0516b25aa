"""Guarded rebuilds: replay an entity's streams into a shadow table while writes go on, catch
up with them, and swap the shadow in in one transaction.

1. The shadow (``<table>__rebuild``) is made from the code's declaration of the table.
2. The entity's events (of one tenant, or all) are replayed into it batch by batch, each batch
   in a transaction of its own, without a lock: writers carry on against the live table.
3. One transaction locks the live table against writers (Postgres: ``EXCLUSIVE``, reads go on;
   SQLite: its one write lock), replays the events committed meanwhile, replays again the
   streams of events that committed behind the replay's position (a writer's transaction that
   was still open when the replay passed its event), and compares the tables: a live row the
   replay did not bring back (it has no events) stops the rebuild with its id, unless orphans
   may be dropped. It then swaps the tables: the live one becomes ``<table>__old`` (kept with
   ``keep=True``, else dropped); for one tenant, that tenant's rows are exchanged instead.

A writer that waited for the lock writes to the swapped table once it is released: Postgres
looks a table up by name again when it was renamed while a statement waited for it.
"""

from __future__ import annotations

import uuid
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

from sqlalchemy import (
    ColumnElement,
    Connection,
    MetaData,
    Table,
    delete,
    func,
    insert,
    inspect,
    select,
)
from sqlalchemy.sql.elements import quoted_name

from asanoha.platform.model import EntityDef
from asanoha.platform.store.database import Database
from asanoha.platform.store.events import read_events
from asanoha.platform.store.projections import (
    RowKey,
    orphan_rows_error,
    projection_vault,
    read_entity_events,
    replay_events,
    row_change,
    write_row_change,
)
from asanoha.platform.store.search import POSTGRES_ONLY
from asanoha.platform.store.tables import Tables

#: Events one replay transaction reads.
REBUILD_BATCH = 5000
#: Postgres's longest identifier.
_MAX_NAME = 63

RebuildPhase = Literal["replay", "swap"]


@dataclass(frozen=True)
class RebuildProgress:
    """Where a rebuild stands: ``replayed`` of about ``total`` events (counted at the start;
    writes made meanwhile add to the replayed count)."""

    phase: RebuildPhase
    replayed: int
    total: int


@dataclass(frozen=True)
class RebuildResult:
    """What a rebuild did."""

    entity: str
    tenant_id: str | None
    #: Events replayed, in all phases.
    replayed: int
    #: Of those, the events replayed under the lock (writes made during the replay).
    caught_up: int
    #: Streams replayed again because an event committed behind the replay's position.
    repaired: int
    #: Ids of live rows without events that the swap dropped (``drop_orphans=True``).
    dropped_orphans: tuple[str, ...]
    #: The table that holds the rows as they were before the swap (``keep=True``).
    kept_table: str | None


class ShadowReplay(Protocol):
    """Events replayed into a shadow table in batches, as a rebuild's first phase reads them."""

    @property
    def replayed(self) -> int: ...

    def count(self, conn: Connection) -> int: ...

    def next_batch(self, conn: Connection, batch: int) -> int: ...


def replay_into_shadow(
    database: Database,
    shadow: Table,
    replay: ShadowReplay,
    batch: int,
    report: Callable[[RebuildProgress], None],
) -> int:
    """A rebuild's first phase, beside live writes: make ``shadow`` empty, then replay into
    it one batch per transaction (no lock on the live table) until a batch comes back short;
    returns how many events there were to replay when it began. The events written
    meanwhile are caught up under the lock, by the caller."""
    with database.begin() as conn:
        shadow.drop(conn, checkfirst=True)
        shadow.create(conn)
    with database.connect() as conn:
        total = replay.count(conn)
    while True:
        with database.begin() as conn:
            read = replay.next_batch(conn, batch)
        report(RebuildProgress("replay", replay.replayed, max(total, replay.replayed)))
        if read < batch:
            return total


def rebuild_guarded(
    database: Database,
    tables: Tables,
    entity_def: EntityDef,
    *,
    tenant_id: str | None = None,
    drop_orphans: bool = False,
    keep: bool = False,
    batch: int = REBUILD_BATCH,
    progress: Callable[[RebuildProgress], None] | None = None,
) -> RebuildResult:
    """Rebuild the entity's table (or one tenant's rows of it) from its events beside live
    writes (see the module). Raises ``ConflictError`` (``projection_orphan_rows``) when live
    rows have no events and ``drop_orphans`` is false; the live table is then unchanged."""
    live = tables.entity(entity_def.key)
    swap = swap_for(database.dialect)
    shadow = swap.shadow_of(live)
    report = progress or (lambda _: None)
    replay = _Replay(tables, entity_def, shadow, tenant_id)
    try:
        total = replay_into_shadow(database, shadow, replay, batch, report)
        with database.begin() as conn:
            swap.lock(conn, live)
            before = replay.replayed
            while replay.next_batch(conn, batch) == batch:
                pass
            caught_up = replay.replayed - before
            repaired = replay.repair(conn)
            orphans = _orphans(conn, live, shadow, tenant_id)
            if orphans and not drop_orphans:
                raise orphan_rows_error(entity_def, orphans)
            kept = swap.exchange(conn, live, shadow, tenant_id, keep=keep)
            report(RebuildProgress("swap", replay.replayed, max(total, replay.replayed)))
    except BaseException:
        with database.begin() as conn:
            shadow.drop(conn, checkfirst=True)
        raise
    return RebuildResult(
        entity=entity_def.key,
        tenant_id=tenant_id,
        replayed=replay.replayed,
        caught_up=caught_up,
        repaired=repaired,
        dropped_orphans=tuple(sorted(str(row_id) for _, row_id in orphans)),
        kept_table=kept,
    )


def shadow_name(table: str) -> str:
    """The table a rebuild of ``table`` replays into."""
    return _suffixed(table, "__rebuild")


def kept_name(table: str) -> str:
    """The table that keeps the rows of ``table`` as they were before a rebuild (``keep``)."""
    return _suffixed(table, "__old")


class _Replay:
    """The replay of one entity's events (of one tenant, or all) into the shadow, with the
    positions it replayed (8 bytes an event), to find events that committed behind it."""

    def __init__(
        self, tables: Tables, entity_def: EntityDef, shadow: Table, tenant_id: str | None
    ) -> None:
        self.tables = tables
        self.entity_def = entity_def
        self.shadow = shadow
        self.tenant_id = tenant_id
        self.position = 0
        self.replayed = 0
        self.seen = array("q")

    def _scope(self) -> list[ColumnElement[bool]]:
        events = self.tables.events
        scope = [events.c.stream_type == self.entity_def.key]
        if self.tenant_id is not None:
            scope.append(events.c.tenant_id == self.tenant_id)
        return scope

    def count(self, conn: Connection) -> int:
        """How many events there are to replay now."""
        query = select(func.count()).select_from(self.tables.events).where(*self._scope())
        return int(conn.execute(query).scalar_one())

    def next_batch(self, conn: Connection, batch: int) -> int:
        """Replay the next events after the position; return how many there were."""
        found = read_entity_events(
            conn,
            self.tables,
            self.entity_def,
            after=self.position,
            limit=batch,
            tenant_id=self.tenant_id,
        )
        if found:
            replay_events(conn, self.shadow, self.entity_def, found)
            self.position = found[-1].id
            self.replayed += len(found)
            self.seen.extend(event.id for event in found)
        return len(found)

    def repair(self, conn: Connection) -> int:
        """Replay again, from their first event, the streams with events at or below the
        position that the replay did not see; return how many streams."""
        events = self.tables.events
        scope = [*self._scope(), events.c.id <= self.position]
        stored = conn.execute(select(func.count()).select_from(events).where(*scope)).scalar_one()
        if int(stored) == len(self.seen):
            return 0
        seen = set(self.seen)
        query = select(events.c.id, events.c.tenant_id, events.c.stream_id).where(*scope)
        missed = {
            (tenant, stream) for id_, tenant, stream in conn.execute(query) if id_ not in seen
        }
        for tenant, stream in sorted(missed):
            self._replay_stream(conn, tenant, stream)
        return len(missed)

    def _replay_stream(self, conn: Connection, tenant_id: str, stream_id: str) -> None:
        shadow = self.shadow
        row_id = uuid.UUID(stream_id)
        conn.execute(delete(shadow).where(shadow.c.tenant_id == tenant_id, shadow.c.id == row_id))
        vault = projection_vault(conn, self.entity_def)
        after = 0
        while True:
            # Sealed: the row keeps the values as the events hold them.
            page = read_events(
                conn,
                self.tables,
                after=after,
                stream_id=stream_id,
                tenant_id=tenant_id,
                opened=False,
            )
            for event in page:
                if event.id <= self.position:
                    change = row_change(self.entity_def, event, vault)
                    write_row_change(conn, shadow, change)
            if not page:
                return
            after = page[-1].id


def _orphans(conn: Connection, live: Table, shadow: Table, tenant_id: str | None) -> set[RowKey]:
    """Live rows (of the tenant, or all) that the replay did not bring back."""
    replayed = select(shadow.c.id).where(
        shadow.c.tenant_id == live.c.tenant_id, shadow.c.id == live.c.id
    )
    query = select(live.c.tenant_id, live.c.id).where(~replayed.exists())
    if tenant_id is not None:
        query = query.where(live.c.tenant_id == tenant_id)
    return {(tenant, row_id) for tenant, row_id in conn.execute(query)}


class _Swap(Protocol):
    """What differs between the backends in a swap: indexes, and the lock on writers."""

    def shadow_of(self, live: Table) -> Table: ...

    def lock(self, conn: Connection, live: Table) -> None: ...

    def exchange(
        self, conn: Connection, live: Table, shadow: Table, tenant_id: str | None, *, keep: bool
    ) -> str | None: ...


def swap_for(dialect: str) -> _Swap:
    """The swap of the database's dialect (shared with the rebuild of declared projections)."""
    return _PostgresSwap() if dialect == "postgresql" else _SqliteSwap()


class _PostgresSwap:
    """Postgres: the shadow has the live table's indexes under other names from the start
    (the swap renames them: no index is built under the lock)."""

    def shadow_of(self, live: Table) -> Table:
        shadow = _copy_table(live, shadow_name(live.name))
        for index in shadow.indexes:
            index.name = quoted_name(_suffixed(str(index.name), "__rb"), None)
        return shadow

    def lock(self, conn: Connection, live: Table) -> None:
        # Writers wait (their row locks conflict); plain reads go on until the renames.
        conn.exec_driver_sql(f'LOCK TABLE "{live.name}" IN EXCLUSIVE MODE')

    def exchange(
        self, conn: Connection, live: Table, shadow: Table, tenant_id: str | None, *, keep: bool
    ) -> str | None:
        if tenant_id is not None:
            return _exchange_tenant(conn, live, shadow, tenant_id, keep=keep)
        old = kept_name(live.name)
        inspector = inspect(conn)
        old_indexes = {str(index["name"]) for index in inspector.get_indexes(live.name)}
        live_pkey = inspector.get_pk_constraint(live.name)["name"]
        conn.exec_driver_sql(f'DROP TABLE IF EXISTS "{old}"')
        conn.exec_driver_sql(f'ALTER TABLE "{live.name}" RENAME TO "{old}"')
        if keep:
            for name in sorted(old_indexes):
                _rename_index(conn, name, _suffixed(name, "__old"))
            if live_pkey:
                _rename_constraint(conn, old, live_pkey, _suffixed(old, "_pkey"))
        else:
            conn.exec_driver_sql(f'DROP TABLE "{old}"')
        conn.exec_driver_sql(f'ALTER TABLE "{shadow.name}" RENAME TO "{live.name}"')
        for declared in live.indexes:
            _rename_index(conn, _suffixed(str(declared.name), "__rb"), str(declared.name))
        shadow_pkey = inspect(conn).get_pk_constraint(live.name)["name"]
        if shadow_pkey and live_pkey:
            _rename_constraint(conn, live.name, shadow_pkey, live_pkey)
        return old if keep else None


class _SqliteSwap:
    """SQLite: one writer at a time, and no index renames: the shadow has no secondary
    indexes, the swap builds them (SQLite databases are small)."""

    def shadow_of(self, live: Table) -> Table:
        shadow = _copy_table(live, shadow_name(live.name))
        shadow.indexes.clear()
        return shadow

    def lock(self, conn: Connection, live: Table) -> None:
        # ``Database.begin`` holds SQLite's write lock already (BEGIN IMMEDIATE).
        return None

    def exchange(
        self, conn: Connection, live: Table, shadow: Table, tenant_id: str | None, *, keep: bool
    ) -> str | None:
        if tenant_id is not None:
            return _exchange_tenant(conn, live, shadow, tenant_id, keep=keep)
        old = kept_name(live.name)
        old_indexes = [index["name"] for index in inspect(conn).get_indexes(live.name)]
        conn.exec_driver_sql(f'DROP TABLE IF EXISTS "{old}"')
        conn.exec_driver_sql(f'ALTER TABLE "{live.name}" RENAME TO "{old}"')
        for name in old_indexes:
            conn.exec_driver_sql(f'DROP INDEX IF EXISTS "{name}"')
        if not keep:
            conn.exec_driver_sql(f'DROP TABLE "{old}"')
        conn.exec_driver_sql(f'ALTER TABLE "{shadow.name}" RENAME TO "{live.name}"')
        for index in live.indexes:
            if not index.info.get(POSTGRES_ONLY):
                index.create(conn)
        return old if keep else None


def _exchange_tenant(
    conn: Connection, live: Table, shadow: Table, tenant_id: str, *, keep: bool
) -> str | None:
    """One tenant's rows: keep a copy (``keep``), replace them with the shadow's, drop it."""
    names = [column.name for column in live.columns]
    old: str | None = None
    if keep:
        old = kept_name(live.name)
        kept = _copy_table(live, old)
        kept.indexes.clear()
        kept.drop(conn, checkfirst=True)
        kept.create(conn)
        rows = select(*(live.c[name] for name in names)).where(live.c.tenant_id == tenant_id)
        conn.execute(insert(kept).from_select(names, rows))
    conn.execute(delete(live).where(live.c.tenant_id == tenant_id))
    conn.execute(insert(live).from_select(names, select(*(shadow.c[name] for name in names))))
    shadow.drop(conn)
    return old


def _copy_table(live: Table, name: str) -> Table:
    """``live``'s declaration under another name (with its indexes)."""
    copy = live.to_metadata(MetaData(), name=name)
    # ``info`` is copied shallowly, and it holds the live table's compiled inserts (which
    # name the live table): the copy starts with its own.
    copy.info = {}
    return copy


def _rename_index(conn: Connection, old: str, new: str) -> None:
    conn.exec_driver_sql(f'ALTER INDEX "{old}" RENAME TO "{new}"')


def _rename_constraint(conn: Connection, table: str, old: str, new: str) -> None:
    conn.exec_driver_sql(f'ALTER TABLE "{table}" RENAME CONSTRAINT "{old}" TO "{new}"')


def _suffixed(name: str, suffix: str) -> str:
    return name[: _MAX_NAME - len(suffix)] + suffix
