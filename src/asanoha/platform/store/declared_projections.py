"""Declared projections (``feature.projection``): kept in the write's transaction, rebuilt
into a shadow table beside live writes.

The write path calls ``apply_declared_projections`` with each event it appends, right after
the entity row (the executor's and ``append_event``'s append-and-project step), so a
projection moves with its events or not at all. ``rebuild_declared_projection`` replays every
event of the projection's types into ``<table>__rebuild`` batch by batch, each batch in a
transaction of its own, then, in one transaction that locks the live table against writers,
replays the events committed meanwhile and swaps the shadow in (the swap of entity rebuilds,
``store/rebuild.py``). A writer that appended an event behind the replay's position holds the
live table until it commits, so under the lock every such event is visible: when there is one
the replay starts again under the lock (a projection may fold many streams into one row, so
replaying one stream again would not do).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Executable, Result, Table, delete, func, select

from asanoha.platform.model import Registry
from asanoha.platform.model.projections import ProjectionDef
from asanoha.platform.store.database import Database
from asanoha.platform.store.events import StoredEvent, read_events
from asanoha.platform.store.rebuild import (
    REBUILD_BATCH,
    RebuildProgress,
    replay_into_shadow,
    swap_for,
)
from asanoha.platform.store.tables import Tables


@dataclass(frozen=True)
class ProjectionTarget:
    """What a projection function writes: ``table`` (the live table, or a rebuild's shadow)
    through ``execute``, in the transaction of the write or of the rebuild."""

    table: Table
    _conn: Connection

    def execute(self, statement: Executable, parameters: Any = None) -> Result[Any]:
        """Run one statement on ``table`` in the current transaction."""
        return self._conn.execute(statement, parameters)


def apply_declared_projections(conn: Connection, registry: Registry, event: StoredEvent) -> None:
    """Apply ``event`` to every declared projection that follows its type (live tables)."""
    for projection in registry.projections_on(event.type):
        projection.func(event, ProjectionTarget(projection.table, conn))


@dataclass(frozen=True)
class ProjectionRebuildResult:
    """What a rebuild of a declared projection did."""

    projection: str
    replayed: int
    #: Of those, the events replayed under the lock (written during the rebuild).
    caught_up: int
    #: Whether an event committed behind the replay's position made it start again.
    restarted: bool


def rebuild_declared_projection(
    database: Database,
    tables: Tables,
    projection: ProjectionDef,
    *,
    batch: int = REBUILD_BATCH,
    progress: Callable[[RebuildProgress], None] | None = None,
) -> ProjectionRebuildResult:
    """Rebuild ``projection``'s table from its events beside live writes (see the module)."""
    live = projection.table
    swap = swap_for(database.dialect)
    shadow = swap.shadow_of(live)
    report = progress or (lambda _: None)
    replay = ProjectionReplay(tables, projection, shadow)
    try:
        total = replay_into_shadow(database, shadow, replay, batch, report)
        with database.begin() as conn:
            swap.lock(conn, live)
            before = replay.replayed
            while replay.next_batch(conn, batch) == batch:
                pass
            caught_up = replay.replayed - before
            restarted = replay.missed_any(conn)
            if restarted:
                replay.restart(conn)
                while replay.next_batch(conn, batch) == batch:
                    pass
            swap.exchange(conn, live, shadow, None, keep=False)
            report(RebuildProgress("swap", replay.replayed, max(total, replay.replayed)))
    except BaseException:
        with database.begin() as conn:
            shadow.drop(conn, checkfirst=True)
        raise
    return ProjectionRebuildResult(projection.qn, replay.replayed, caught_up, restarted)


class ProjectionReplay:
    """The replay of a projection's events into the shadow, counting what it saw: every
    event of its types, or (an async projection's rebuild) those up to ``through`` that
    ``keep`` admits (the ones its consumer has delivered)."""

    def __init__(
        self,
        tables: Tables,
        projection: ProjectionDef,
        shadow: Table,
        *,
        through: int | None = None,
        keep: Callable[[StoredEvent], bool] | None = None,
    ) -> None:
        self.tables = tables
        self.projection = projection
        self.shadow = shadow
        self.through = through
        self.keep = keep
        self.position = 0
        self.replayed = 0
        self.seen = 0

    def count(self, conn: Connection) -> int:
        events = self.tables.events
        query = select(func.count()).where(events.c.type.in_(self.projection.on))
        return int(conn.execute(query).scalar_one())

    def next_batch(self, conn: Connection, batch: int) -> int:
        # Sealed, as the write path hands the event over: the same values in both tables.
        found = read_events(
            conn,
            self.tables,
            after=self.position,
            limit=batch,
            types=self.projection.on,
            opened=False,
        )
        if self.through is not None:
            # Events past the last one to replay are left out: the short batch ends it.
            found = [event for event in found if event.id <= self.through]
        kept = found if self.keep is None else [event for event in found if self.keep(event)]
        self.apply(conn, kept)
        if found:
            self.position = found[-1].id
            self.seen += len(found)
        return len(found)

    def apply(self, conn: Connection, events: list[StoredEvent]) -> None:
        """Apply ``events`` to the shadow, in this order."""
        target = ProjectionTarget(self.shadow, conn)
        for event in events:
            self.projection.func(event, target)
        self.replayed += len(events)

    def missed_any(self, conn: Connection) -> bool:
        """Whether an event at or below the position committed after the replay passed it."""
        events = self.tables.events
        query = select(func.count()).where(
            events.c.type.in_(self.projection.on), events.c.id <= self.position
        )
        return int(conn.execute(query).scalar_one()) != self.seen

    def restart(self, conn: Connection) -> None:
        conn.execute(delete(self.shadow))
        self.position = 0
        self.seen = 0
