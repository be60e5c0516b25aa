"""Which events a pass may deliver: the one seam between Postgres and SQLite for consumers.

Postgres draws event ids when a row is inserted, so a transaction holding a lower id can
commit after one holding a higher id. A pass that read ``id > position`` only would pass the
lower id while it is invisible and never come back to it. So a pass records the ids it
passed that were not visible (*gaps*, kept as ranges), delivers each once its writer
commits, and forgets it once no transaction that could hold it is running (its writer
rolled back).

When may a gap be forgotten? Every transaction that could hold it got its transaction id
before the scan that found the gap (a writer owns its transaction id before it draws an
event id: see ``PostgresBackend.after_create``; the id was drawn before a higher one that
was visible to the scan). So a transaction id drawn *after* that scan bounds them all, and a
later snapshot whose ``xmin`` (oldest running transaction) is at least that bound proves
they have all ended. The scan's own ``xmax`` is not a safe bound: Postgres defines it as one
past the newest *completed* transaction, and a transaction that got its id after that one and
is still running can sit at or above it (measured: a running xid equal to a later snapshot's
xmin equal to the earlier xmax). The bound is therefore the transaction id of the
consumer's next pass, drawn when it locks the cursor row, which is after the scan.

A consumer registered with ``start="now"`` begins at the newest visible id, and the ids below
it that its registration could not see are gaps by the same rule: their writers got their
transaction ids before that scan, so the first pass's transaction id bounds them. Which ids
can they be? A transaction still running may have drawn its id long ago, so the lowest one is
not known from the events alone; any cursor already on the database is a checkpoint (every id
at or below its position is visible, one of its gaps, or will never appear), and without one
the registration looks at every id.

SQLite has one writer at a time and ids in commit order: a pass reads ``id > position``.

A partitioned consumer has one cursor per partition, each with its own position and gaps: a
pass reads every id as above (an id of another partition that is visible is no gap) and
delivers the events of its partition only. After ``repartition`` a cursor may hold gaps on
SQLite too: ids below its position of events not yet delivered (see ``repartition``).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from sqlalchemy import ColumnElement, Connection, and_, func, or_, select, text

from asanoha.platform.consumers.cursors import Cursor, Gap, cursor_from_row, lock_cursor_row
from asanoha.platform.store import EVENT_COLUMNS, StoredEvent, Tables

_EVENT_COLUMNS = ", ".join(EVENT_COLUMNS)
_WIDTH = len(EVENT_COLUMNS)
_TYPE = EVENT_COLUMNS.index("type")
#: Where a scanned row holds the event's partition key (after the event's columns).
_KEY = _WIDTH
#: Gap ranges one SQLite statement looks into (the rest wait for the next pass).
GAPS_PER_STATEMENT = 200


@dataclass(frozen=True)
class Scan:
    """What one pass found: the events to deliver (in id order) and the cursor state once all
    of them are delivered; ``until`` gives the state when the pass stops at one of them."""

    start: int
    events: Sequence[StoredEvent]
    position: int
    gaps: tuple[Gap, ...]
    #: Gap ids that became visible and are among ``events`` (delivered late), with the bound
    #: of the range they were in.
    late: dict[int, int | None] = field(default_factory=dict)
    #: Whether the gaps changed (a bound drawn, a gap dropped or seen), events or not.
    gaps_changed: bool = False

    @property
    def changes_state(self) -> bool:
        """Whether saving this scan changes the cursor even if nothing is delivered."""
        return bool(self.events) or self.position != self.start or self.gaps_changed

    def until(self, stop: StoredEvent) -> tuple[int, tuple[Gap, ...]]:
        """Position and gaps when ``stop`` and every later event stay undelivered."""
        if stop.id <= self.start:
            # A late event failed: the position stays, and it and the late events after it
            # stay gaps (the fresh range is scanned again next time).
            kept = [gap for gap in self.gaps if gap.last <= self.start]
            kept += [Gap(i, i, bound) for i, bound in self.late.items() if i >= stop.id]
            return self.start, tuple(sorted(kept, key=lambda gap: gap.first))
        return stop.id - 1, tuple(gap for gap in self.gaps if gap.last < stop.id)


class Visibility(Protocol):
    """Locks a cursor and finds the committed events a pass may deliver."""

    def lock(
        self, conn: Connection, tables: Tables, name: str, partition: int = 0
    ) -> Cursor | None:
        """Lock the cursor row of ``name``'s ``partition``; ``None`` when it is missing or
        another pass holds it."""

    def scan(
        self, conn: Connection, tables: Tables, cursor: Cursor, types: Sequence[str], limit: int
    ) -> Scan:
        """The next events of ``types`` after the cursor, at most about ``limit`` of them."""

    def start_now(
        self, conn: Connection, tables: Tables, floor: int
    ) -> tuple[int, tuple[Gap, ...]]:
        """Where a consumer registered with ``start="now"`` begins: the newest visible id and
        the ids at or above ``floor`` below it that are not visible (ids below ``floor`` are
        known to be visible or never to appear)."""

    def draw_bound(self, conn: Connection) -> int | None:
        """A transaction id drawn now, the bound of gaps an earlier scan found (what
        ``lock`` draws for a cursor; for readers that keep their cursor in memory)."""


def _scan_sql(columns: str) -> str:
    """The scan statement of ``PostgresVisibility`` reading ``columns`` of each event."""
    return (
        "SELECT e.*, s.xmin FROM "
        "(SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS xmin) AS s "
        "LEFT JOIN LATERAL ("
        "(SELECT x.* FROM unnest(CAST(:firsts AS bigint[]), CAST(:lasts AS bigint[])) "
        "AS g(first, last) CROSS JOIN LATERAL "
        f"(SELECT {columns}, partition_key FROM asanoha_events "
        "WHERE id BETWEEN g.first AND g.last "
        "ORDER BY id LIMIT :limit) AS x ORDER BY x.id LIMIT :limit) "
        "UNION ALL "
        f"(SELECT {columns}, partition_key FROM asanoha_events WHERE id > :position "
        "ORDER BY id LIMIT :limit)"
        ") AS e ON true"
    )


_MINE = "partition_key % :partitions = :partition"
_PARTITION_COLUMNS = ", ".join(
    f"CASE WHEN {_MINE} THEN {name} END AS {name}" if name in ("payload", "metadata") else name
    for name in EVENT_COLUMNS
)


class PostgresVisibility:
    """Gap tracking with transaction-id bounds (see the module docstring)."""

    _lock = text(
        "SELECT name, position, gaps, types, status, attempts, event_id, last_error, skipped, "
        "retry_at, resume_status, partition, partitions, "
        "pg_current_xact_id()::text::bigint AS xid FROM asanoha_consumers "
        "WHERE name = :name AND partition = :partition FOR UPDATE SKIP LOCKED"
    )
    # One statement, so the gaps that became visible, the next ids and the snapshot's xmin
    # come from one snapshot: a gap dropped by this xmin cannot have become visible unseen.
    # Each gap range is an index range scan: its cost is the ids that became visible, not
    # the size of the range.
    _scan = text(_scan_sql(_EVENT_COLUMNS))
    # A partition's pass looks at every id (for its gaps) but reads the payload and metadata
    # of its own events only: the others' are never decoded.
    _scan_partition = text(_scan_sql(_PARTITION_COLUMNS))
    # The head and the ids missing below it, from one snapshot.
    _start = text(
        "SELECT h.head, g.first, g.last FROM "
        "(SELECT coalesce(max(id), 0) AS head FROM asanoha_events) AS h "
        "LEFT JOIN LATERAL ("
        "SELECT prev + 1 AS first, id - 1 AS last FROM ("
        "SELECT id, lag(id, 1, CAST(:floor AS bigint) - 1) OVER (ORDER BY id) AS prev "
        "FROM asanoha_events WHERE id >= :floor AND id <= h.head"
        ") AS ids WHERE id > prev + 1"
        ") AS g ON true ORDER BY g.first"
    )

    _draw = text("SELECT pg_current_xact_id()::text::bigint")

    def lock(
        self, conn: Connection, tables: Tables, name: str, partition: int = 0
    ) -> Cursor | None:
        row = conn.execute(self._lock, {"name": name, "partition": partition}).mappings().first()
        return None if row is None else cursor_from_row(row, xid=int(row["xid"]))

    def scan(
        self, conn: Connection, tables: Tables, cursor: Cursor, types: Sequence[str], limit: int
    ) -> Scan:
        params = {
            "firsts": [gap.first for gap in cursor.gaps],
            "lasts": [gap.last for gap in cursor.gaps],
            "position": cursor.position,
            "limit": limit,
        }
        # Plain rows (the columns in _EVENT_COLUMNS' order, then xmin): this is the hot loop
        # of a consumer catching up.
        statement = self._scan
        if cursor.partitions > 1:
            statement = self._scan_partition
            params |= {"partitions": cursor.partitions, "partition": cursor.partition}
        rows = conn.execute(statement, params).all()
        xmin = int(rows[0][-1])
        visible = {row[0]: row for row in rows if row[0] is not None}
        wanted = frozenset(types)
        seen = sorted(event_id for event_id in visible if event_id <= cursor.position)
        # With ``limit`` late ids read, those above the last one were not looked at.
        examined_to = seen[-1] if len(seen) >= limit else None
        late: dict[int, int | None] = {}
        gaps: list[Gap] = []
        for gap in cursor.gaps:
            inside = seen[bisect.bisect_left(seen, gap.first) : bisect.bisect_right(seen, gap.last)]
            for event_id in inside:
                row = visible[event_id]
                if row[_TYPE] in wanted and cursor.owns(row[_KEY]):
                    late[event_id] = gap.bound
            for part in gap.without(inside):
                if examined_to is not None and part.last > examined_to:
                    if part.first <= examined_to:
                        gaps += _settle(Gap(part.first, examined_to, part.bound), cursor, xmin)
                    gaps.append(Gap(max(part.first, examined_to + 1), part.last, part.bound))
                    continue
                gaps += _settle(part, cursor, xmin)
        fresh = sorted(event_id for event_id in visible if event_id > cursor.position)
        if examined_to is not None:
            # Late ids above examined_to wait for the next pass; an event after them may be
            # of the same stream, so nothing past the position is delivered before them.
            fresh = []
        previous = cursor.position
        for event_id in fresh:
            if event_id > previous + 1:
                gaps.append(Gap(previous + 1, event_id - 1))
            previous = event_id
        events = [
            StoredEvent(*visible[event_id][:_WIDTH])
            for event_id in sorted([*late, *fresh])
            if visible[event_id][_TYPE] in wanted and cursor.owns(visible[event_id][_KEY])
        ]
        return Scan(
            cursor.position, events, previous, tuple(gaps), late, tuple(gaps) != cursor.gaps
        )

    def draw_bound(self, conn: Connection) -> int | None:
        return int(conn.execute(self._draw).scalar_one())

    def start_now(
        self, conn: Connection, tables: Tables, floor: int
    ) -> tuple[int, tuple[Gap, ...]]:
        rows = conn.execute(self._start, {"floor": max(floor, 1)}).all()
        head = int(rows[0].head)
        # Bound None: the first pass draws one, after this scan (see the module docstring).
        gaps = tuple(Gap(int(row.first), int(row.last)) for row in rows if row.first is not None)
        return head, gaps


def _settle(gap: Gap, cursor: Cursor, xmin: int) -> list[Gap]:
    """``gap`` after a scan that found none of its ids visible: bounded, kept, or dropped."""
    if gap.bound is None:
        # Drawn after the scan that found this gap (the previous pass committed).
        return [Gap(gap.first, gap.last, cursor.xid)]
    if xmin < gap.bound:
        return [gap]
    # Every transaction that could hold these ids has ended: they never appear.
    return []


class SqliteVisibility:
    """One writer at a time (taken at BEGIN): committed ids only ever grow, no gaps."""

    def lock(
        self, conn: Connection, tables: Tables, name: str, partition: int = 0
    ) -> Cursor | None:
        # The pass's BEGIN IMMEDIATE holds the database's write lock: no other pass or
        # writer runs until it commits (SQLite has no row locks; FOR UPDATE is left out).
        return lock_cursor_row(conn, tables, name, skip_locked=True, partition=partition)

    def scan(
        self, conn: Connection, tables: Tables, cursor: Cursor, types: Sequence[str], limit: int
    ) -> Scan:
        events = tables.events
        mine: ColumnElement[bool] = events.c.type.in_(list(types))
        if cursor.partitions > 1:
            mine = and_(mine, events.c.partition_key % cursor.partitions == cursor.partition)
        if cursor.gaps:
            return self._scan_gaps(conn, tables, cursor, mine, limit)
        query = (
            events.select().where(events.c.id > cursor.position, mine).order_by(events.c.id)
        ).limit(limit)
        found = [_stored(row) for row in conn.execute(query).mappings()]
        position = found[-1].id if found else cursor.position
        return Scan(cursor.position, found, position, ())

    def _scan_gaps(
        self, conn: Connection, tables: Tables, cursor: Cursor, mine: Any, limit: int
    ) -> Scan:
        """After a repartition: the events left in the gaps first (an id there that is not
        visible never appears: no writer runs during a pass); the position stays until
        every gap is done."""
        events = tables.events
        # A bounded number of ranges per statement (SQLite limits an expression's depth).
        head, rest = cursor.gaps[:GAPS_PER_STATEMENT], cursor.gaps[GAPS_PER_STATEMENT:]
        ranges = or_(*(events.c.id.between(gap.first, gap.last) for gap in head))
        query = events.select().where(ranges, mine).order_by(events.c.id).limit(limit)
        found = [_stored(row) for row in conn.execute(query).mappings()]
        gaps = rest
        if len(found) >= limit:
            last = found[-1].id
            left = [Gap(max(gap.first, last + 1), gap.last) for gap in head if gap.last > last]
            gaps = (*left, *rest)
        late: dict[int, int | None] = {event.id: None for event in found}
        return Scan(cursor.position, found, cursor.position, gaps, late, gaps != cursor.gaps)

    def start_now(
        self, conn: Connection, tables: Tables, floor: int
    ) -> tuple[int, tuple[Gap, ...]]:
        head = conn.execute(select(func.coalesce(func.max(tables.events.c.id), 0))).scalar_one()
        return int(head), ()

    def draw_bound(self, conn: Connection) -> int | None:
        return None


def visibility_for(dialect: str) -> Visibility:
    """The visibility rules of a database dialect (``postgresql`` or ``sqlite``)."""
    if dialect == "postgresql":
        return PostgresVisibility()
    if dialect == "sqlite":
        return SqliteVisibility()
    raise ValueError(f"consumers do not support the {dialect!r} database")


def _stored(row: Any) -> StoredEvent:
    return StoredEvent(
        id=int(row["id"]),
        stream_id=row["stream_id"],
        stream_type=row["stream_type"],
        tenant_id=row["tenant_id"],
        version=row["version"],
        type=row["type"],
        schema_version=row["schema_version"],
        payload=row["payload"],
        metadata=row["metadata"],
        created_at=row["created_at"],
        created_by=row["created_by"],
    )
