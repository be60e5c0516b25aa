"""Async projections (``feature.projection(..., mode="async")``): the consumer that keeps each,
and its rebuild.

The consumer ``<feature>:consumer:projection-<name>`` applies each event of the projection's
types to the live table in its delivery's transaction, so the table moves with the cursor: it
holds exactly the events the cursor says were delivered (every id at or below each
partition's position, but its gaps and the events an operator skipped).

A rebuild keeps that rule rather than moving the cursor (the consumer machinery stays the
only writer of its cursors). It replays into a shadow table, beside live deliveries, the events
the cursors had delivered when it began, up to the lowest position; then, in one transaction
that locks the cursor rows (a pass in progress ends first; the next waits) and the live table,
it applies the events delivered since (above that position, or in a gap then) and swaps the
shadow in. The consumer goes on from its cursor, over a table that holds what it delivered.
A cursor that moved back meanwhile (a restart, a repartition) replays the shadow again under
the lock, from the cursors as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, delete, select

from asanoha.platform.consumers.context import ConsumerContext, platform_unit
from asanoha.platform.consumers.cursors import Cursor, lock_cursor_rows, read_cursors
from asanoha.platform.consumers.operations import ConsumerStatus
from asanoha.platform.model import ConsumerDef, Registry
from asanoha.platform.model.projections import ProjectionDef
from asanoha.platform.store import EVENT_COLUMNS, StoredEvent, Tables
from asanoha.platform.store.database import Database
from asanoha.platform.store.declared_projections import (
    ProjectionRebuildResult,
    ProjectionReplay,
    ProjectionTarget,
    rebuild_declared_projection,
)
from asanoha.platform.store.events import partition_key, read_events
from asanoha.platform.store.rebuild import (
    REBUILD_BATCH,
    RebuildProgress,
    replay_into_shadow,
    swap_for,
)


def projection_consumers(registry: Registry) -> tuple[ConsumerDef, ...]:
    """The consumers of the application's async projections."""
    return tuple(
        ConsumerDef(
            qn=projection.consumer_qn,
            feature=projection.feature,
            func=_keeper(projection),
            on=projection.on,
            # A new projection's table is filled from every event there is.
            start="beginning",
            partitions=projection.partitions,
            toggled=False,
        )
        for projection in registry.projections
        if projection.mode == "async"
    )


def describe_projections(
    registry: Registry, statuses: Iterable[ConsumerStatus]
) -> list[dict[str, Any]]:
    """Each declared projection as ``asanoha projections list``, the console and
    ``projection-admin:query:list`` show it: table, mode, the events it follows and, for an
    async one, its consumer's position, lag and status (from ``statuses``)."""
    by_name = {status.name: status for status in statuses}
    described: list[dict[str, Any]] = []
    for declared in registry.projections:
        is_async = declared.mode == "async"
        status = by_name.get(declared.consumer_qn) if is_async else None
        described.append(
            {
                "projection": declared.qn,
                "table": declared.table.name,
                "mode": declared.mode,
                "on": list(declared.on),
                "consumer": declared.consumer_qn if is_async else None,
                "partitions": declared.partitions,
                "position": None if status is None else status.position,
                # Inline: kept in each write's transaction, never behind.
                "lag": 0 if not is_async else (None if status is None else status.lag),
                "status": "inline"
                if not is_async
                else ("unknown" if status is None else status.status),
            }
        )
    return described


def _keeper(projection: ProjectionDef) -> Callable[[StoredEvent, ConsumerContext], None]:
    def keep(event: StoredEvent, ctx: ConsumerContext) -> None:
        """Apply the event to the projection's live table, in the delivery's transaction."""
        service, request = platform_unit(ctx)
        # As the write path and a rebuild hand it over: newest version, values sealed.
        [stored] = read_events(
            request.conn, service.tables, after=event.id - 1, limit=1, opened=False
        )
        projection.func(stored, ProjectionTarget(projection.table, request.conn))

    keep.__name__ = f"keep_{projection.qn.rsplit(':', 1)[-1].replace('-', '_')}"
    return keep


def rebuild_projection(
    database: Database,
    tables: Tables,
    projection: ProjectionDef,
    *,
    batch: int = REBUILD_BATCH,
    progress: Callable[[RebuildProgress], None] | None = None,
) -> ProjectionRebuildResult:
    """Rebuild a declared projection beside live writes: an inline one from every event of its
    types (``store/declared_projections.py``), an async one from those its consumer has
    delivered (see the module)."""
    if projection.mode == "inline":
        return rebuild_declared_projection(
            database, tables, projection, batch=batch, progress=progress
        )
    live = projection.table
    swap = swap_for(database.dialect)
    shadow = swap.shadow_of(live)
    report = progress or (lambda _: None)
    with database.connect() as conn:
        began = Delivered(
            read_cursors(conn, tables, [projection.consumer_qn]).get(projection.consumer_qn, [])
        )
    replay = ProjectionReplay(tables, projection, shadow, through=began.lowest, keep=began.includes)
    try:
        total = replay_into_shadow(database, shadow, replay, batch, report)
        with database.begin() as conn:
            # The cursors first: a pass holds its cursor while it writes the live table.
            now = Delivered(lock_cursor_rows(conn, tables, projection.consumer_qn))
            swap.lock(conn, live)
            before = replay.replayed
            restarted = not now.extends(began)
            if restarted:
                conn.execute(delete(shadow))
                late = now.events(conn, tables, projection, after=0)
            else:
                late = [
                    event
                    for event in now.events(conn, tables, projection, after=began.lowest)
                    + now.events_in(conn, tables, projection, began.gaps_through(began.lowest))
                    if not (event.id <= began.lowest and began.includes(event))
                ]
            # In id order, once each (the gaps of two partitions may cover the same ids).
            replay.apply(conn, list({event.id: event for event in sorted(late, key=_id)}.values()))
            swap.exchange(conn, live, shadow, None, keep=False)
            report(RebuildProgress("swap", replay.replayed, max(total, replay.replayed)))
    except BaseException:
        with database.begin() as conn:
            shadow.drop(conn, checkfirst=True)
        raise
    return ProjectionRebuildResult(
        projection.qn, replay.replayed, replay.replayed - before, restarted
    )


@dataclass(frozen=True)
class Delivered:
    """The events a consumer's cursors say were delivered: per partition, every id at or
    below its position but those in its gaps and those an operator skipped."""

    cursors: Sequence[Cursor]

    @property
    def lowest(self) -> int:
        """The lowest position of the partitions (0: no cursor yet)."""
        return min((cursor.position for cursor in self.cursors), default=0)

    def includes(self, event: StoredEvent) -> bool:
        """Whether ``event`` was delivered."""
        cursor = self._owner(event)
        return (
            cursor is not None
            and event.id <= cursor.position
            and not any(event.id in gap for gap in cursor.gaps)
            and event.id not in _skipped(cursor)
        )

    def extends(self, earlier: Delivered) -> bool:
        """Whether every event ``earlier`` held as delivered is still held so: the same
        partitions, none moved back, no new gap or skip at or below an earlier position."""
        if [(c.partition, c.partitions) for c in self.cursors] != [
            (c.partition, c.partitions) for c in earlier.cursors
        ]:
            return False
        for cursor, before in zip(self.cursors, earlier.cursors, strict=True):
            if cursor.position < before.position:
                return False
            for gap in cursor.gaps:
                low = gap.first
                high = min(gap.last, before.position)
                if low <= high and not any(
                    old.first <= low and high <= old.last for old in before.gaps
                ):
                    return False
            if not _skipped(before) <= _skipped(cursor):
                return False
        return True

    def gaps_through(self, position: int) -> list[tuple[int, int]]:
        """The id ranges of the gaps at or below ``position``."""
        return [
            (gap.first, min(gap.last, position))
            for cursor in self.cursors
            for gap in cursor.gaps
            if gap.first <= position
        ]

    def events(
        self, conn: Connection, tables: Tables, projection: ProjectionDef, *, after: int
    ) -> list[StoredEvent]:
        """The delivered events of the projection's types above ``after``."""
        highest = max((cursor.position for cursor in self.cursors), default=0)
        found: list[StoredEvent] = []
        while after < highest:
            batch = read_events(
                conn, tables, after=after, limit=REBUILD_BATCH, types=projection.on, opened=False
            )
            found += [e for e in batch if e.id <= highest and self.includes(e)]
            if len(batch) < REBUILD_BATCH or batch[-1].id >= highest:
                break
            after = batch[-1].id
        return found

    def events_in(
        self,
        conn: Connection,
        tables: Tables,
        projection: ProjectionDef,
        ranges: Iterable[tuple[int, int]],
    ) -> list[StoredEvent]:
        """The delivered events of the projection's types whose ids are in ``ranges``."""
        events = tables.events
        found: list[StoredEvent] = []
        for first, last in ranges:
            rows = conn.execute(
                select(*(events.c[name] for name in EVENT_COLUMNS))
                .where(events.c.id.between(first, last), events.c.type.in_(projection.on))
                .order_by(events.c.id)
            ).mappings()
            stored = tables.upcasters.upcast_all([StoredEvent(**row) for row in rows])
            found += [event for event in stored if self.includes(event)]
        return found

    def _owner(self, event: StoredEvent) -> Cursor | None:
        if not self.cursors:
            return None
        key = partition_key(event.tenant_id, event.stream_id)
        return next((cursor for cursor in self.cursors if cursor.owns(key)), None)


def _id(event: StoredEvent) -> int:
    return event.id


def _skipped(cursor: Cursor) -> frozenset[int]:
    return frozenset(
        int(record["event_id"]) for record in cursor.skipped if record.get("event_id") is not None
    )
