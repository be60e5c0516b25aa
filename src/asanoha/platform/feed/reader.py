"""Reading the event log for the feed with the consumers' gap rules (``consumers.
visibility``), handing out events only up to a *settled* position.

A transaction holding a lower event id can commit after one holding a higher id. A consumer
keeps such ids as gaps and delivers them late; a feed client cannot: its only resume token
is the last id it received (``Last-Event-ID``). So the reader keeps its cursor (position and
gaps) in memory, and hands out an event only once every id below it is settled: visible
(and handed out before it, in id order) or known never to appear (its writer rolled back).
Events above the lowest open gap are held until it settles. Then "everything up to the last
id" is exact: a client that resumes after id N misses nothing and gets nothing twice, and
every stream's events come in order. The price: a write transaction that stays open holds
the feed back until it ends (it is not lost).

On SQLite ids become visible in commit order (one writer): nothing is ever held.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections import defaultdict
from collections.abc import Sequence

from sqlalchemy import Connection, func, select

from asanoha.platform.consumers.cursors import Cursor, Gap
from asanoha.platform.consumers.visibility import visibility_for
from asanoha.platform.feed.access import FeedAccess, FeedItem
from asanoha.platform.model import EntityDef
from asanoha.platform.personal import entities as personal_entities
from asanoha.platform.personal import events as personal_events
from asanoha.platform.personal.vault import PersonalData
from asanoha.platform.store import Database, StoredEvent, Tables, read_events

#: Ids below the head that the reader checks for writes still open when it starts (an id
#: drawn further back than this by a transaction still running is not waited for).
START_WINDOW = 100_000


def settled(position: int, gaps: Sequence[Gap]) -> int:
    """The highest id below which every id is settled: below the lowest gap, or the
    position when there is none."""
    return min(gap.first for gap in gaps) - 1 if gaps else position


@dataclasses.dataclass(frozen=True)
class Batch:
    """What one read found: the events settled since the previous read (in id order), the
    id up to which every event is now handed out, and whether more may be waiting."""

    events: list[StoredEvent]
    watermark: int
    more: bool


class FeedReader:
    """The one cursor of a process's feed: ``read`` returns the next settled events."""

    def __init__(
        self,
        database: Database,
        tables: Tables,
        access: FeedAccess,
        personal: PersonalData,
        types: Sequence[str],
        *,
        limit: int = 1000,
    ) -> None:
        self._database = database
        self._tables = tables
        self._access = access
        self._personal = personal
        self._types = tuple(types)
        self._limit = limit
        self._visibility = visibility_for(database.dialect)
        self._cursor: Cursor | None = None
        self._held: list[StoredEvent] = []
        #: Every id up to here is handed out or never appears.
        self.watermark = 0

    @property
    def types(self) -> tuple[str, ...]:
        """The event types the feed reads."""
        return self._types

    def start(self) -> int:
        """Begin at the head of the log (ids below it still being written are gaps)."""
        with self._database.begin() as conn:
            events = self._tables.events
            head = int(conn.execute(select(func.coalesce(func.max(events.c.id), 0))).scalar_one())
            floor = max(1, head - START_WINDOW)
            position, gaps = self._visibility.start_now(conn, self._tables, floor)
        self._cursor = Cursor("feed", position, gaps, "idle", 0, None, None)
        self._held = []
        self.watermark = settled(position, gaps)
        return self.watermark

    def read(self) -> Batch:
        """The events settled since the last read, in id order, as stored (``prepare_batch``
        makes them ready for clients: only when somebody listens)."""
        if self._cursor is None:
            self.start()
        assert self._cursor is not None
        with self._database.begin() as conn:
            # Drawn after the previous scan: the bound of the gaps it found (``visibility``);
            # only when one waits for it, so an idle feed takes no transaction id per read.
            unbounded = any(gap.bound is None for gap in self._cursor.gaps)
            xid = self._visibility.draw_bound(conn) if unbounded else None
            cursor = dataclasses.replace(self._cursor, xid=xid)
            scan = self._visibility.scan(conn, self._tables, cursor, self._types, self._limit)
        self._cursor = dataclasses.replace(cursor, position=scan.position, gaps=scan.gaps)
        watermark = settled(scan.position, scan.gaps)
        ready = sorted([*self._held, *scan.events], key=lambda event: event.id)
        self._held = [event for event in ready if event.id > watermark]
        self.watermark = watermark
        more = scan.position - scan.start >= self._limit or (
            bool(scan.late) and scan.position == scan.start
        )
        return Batch([event for event in ready if event.id <= watermark], watermark, more)

    def prepare_batch(self, events: Sequence[StoredEvent]) -> list[FeedItem]:
        """``prepare`` in a transaction of its own."""
        if not events:
            return []
        with self._database.begin() as conn:
            return self.prepare(conn, events)

    def read_range(
        self, tenant_id: str | None, after: int, until: int, types: Sequence[str], limit: int
    ) -> list[FeedItem]:
        """Events of ``tenant_id`` (``None``: every tenant) and ``types`` with ids in
        ``(after, until]`` (settled ids: a client catching up), at most ``limit``, prepared."""
        if not types or after >= until:
            return []
        with self._database.begin() as conn:
            found = read_events(
                conn,
                self._tables,
                after=after,
                limit=limit,
                types=types,
                tenant_id=tenant_id,
                upcast=False,
                opened=False,
            )
            return self.prepare(conn, [event for event in found if event.id <= until])

    def prepare(self, conn: Connection, events: Sequence[StoredEvent]) -> list[FeedItem]:
        """``events`` as every client's message starts: upcast, opened, with the rows an
        owner rule reads (one query per entity for the whole batch) and the files their
        file fields name (one query per tenant for the whole batch)."""
        if not events:
            return []
        opened = personal_events.reveal_events(
            conn, self._tables.upcasters.upcast_all(list(events))
        )
        items = [FeedItem(event, self._access.entity_of(event)) for event in opened]
        wanted: dict[str, list[FeedItem]] = defaultdict(list)
        entities: dict[str, EntityDef] = {}
        for item in items:
            if item.entity is not None and self._access.needs_row(item.entity):
                wanted[item.entity.key].append(item)
                entities[item.entity.key] = item.entity
        for key, waiting in wanted.items():
            rows = self._rows(conn, entities[key], waiting)
            for item in waiting:
                item.row = rows.get((item.event.tenant_id, item.event.stream_id))
        self._access.look_up_files(conn, items)
        return items

    def _rows(
        self, conn: Connection, entity_def: EntityDef, items: Sequence[FeedItem]
    ) -> dict[tuple[str, str], dict[str, object]]:
        table = self._tables.entity(entity_def.key)
        ids: set[uuid.UUID] = set()
        for item in items:
            try:
                ids.add(uuid.UUID(item.event.stream_id))
            except ValueError:
                continue
        if not ids:
            return {}
        found = [
            dict(row) for row in conn.execute(select(table).where(table.c.id.in_(ids))).mappings()
        ]
        rows = personal_entities.reveal_rows(self._personal.vault(conn), entity_def, found)
        return {(str(row["tenant_id"]), str(row["id"])): row for row in rows}
