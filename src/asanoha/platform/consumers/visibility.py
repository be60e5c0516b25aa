"""Which events a pass may deliver: the one seam between Postgres and SQLite for consumers.

Postgres draws event ids when a row is inserted, so a transaction holding a lower id can
commit after one holding a higher id. A pass that read ``id > position`` only would pass the
lower id while it is invisible and never come back to it. So a pass records the ids it
passed that were not visible (*gaps*), delivers each once its writer commits, and forgets it
once no transaction that could hold it is running (its writer rolled back).

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

SQLite has one writer at a time and ids in commit order: a pass reads ``id > position``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from sqlalchemy import Connection, text

from asanoha.platform.consumers.cursors import Cursor, Gap, cursor_from_row, lock_cursor_row
from asanoha.platform.store import EVENT_COLUMNS, StoredEvent, Tables

_EVENT_COLUMNS = ", ".join(EVENT_COLUMNS)
_WIDTH = len(EVENT_COLUMNS)
_TYPE = EVENT_COLUMNS.index("type")


@dataclass(frozen=True)
class Scan:
    """What one pass found: the events to deliver (in id order) and the cursor state once all
    of them are delivered; ``until`` gives the state when the pass stops at one of them."""

    start: int
    events: Sequence[StoredEvent]
    position: int
    gaps: tuple[Gap, ...]
    #: Gaps that became visible and are among ``events`` (delivered late), with their bound.
    late: dict[int, Gap] = field(default_factory=dict)
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
            kept = [gap for gap in self.gaps if gap.id <= self.start]
            kept += [gap for gap_id, gap in self.late.items() if gap_id >= stop.id]
            return self.start, tuple(sorted(kept, key=lambda gap: gap.id))
        return stop.id - 1, tuple(gap for gap in self.gaps if gap.id < stop.id)


class Visibility(Protocol):
    """Locks a cursor and finds the committed events a pass may deliver."""

    def lock(self, conn: Connection, tables: Tables, name: str) -> Cursor | None:
        """Lock the cursor row ``name``; ``None`` when it is missing or another pass holds it."""

    def scan(
        self, conn: Connection, tables: Tables, cursor: Cursor, types: Sequence[str], limit: int
    ) -> Scan:
        """The next events of ``types`` after the cursor, at most about ``limit`` of them."""


class PostgresVisibility:
    """Gap tracking with transaction-id bounds (see the module docstring)."""

    _lock = text(
        "SELECT name, position, gaps, types, status, attempts, event_id, last_error, skipped, "
        "pg_current_xact_id()::text::bigint AS xid "
        "FROM asanoha_consumers WHERE name = :name FOR UPDATE SKIP LOCKED"
    )
    # One statement, so the gaps that became visible, the next ids and the snapshot's xmin
    # come from one snapshot: a gap dropped by this xmin cannot have become visible unseen.
    _scan = text(
        "SELECT e.*, s.xmin FROM "
        "(SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS xmin) AS s "
        "LEFT JOIN LATERAL ("
        f"(SELECT {_EVENT_COLUMNS} FROM asanoha_events WHERE id = ANY(CAST(:gaps AS bigint[]))) "
        "UNION ALL "
        f"(SELECT {_EVENT_COLUMNS} FROM asanoha_events WHERE id > :position "
        "ORDER BY id LIMIT :limit)"
        ") AS e ON true"
    )

    def lock(self, conn: Connection, tables: Tables, name: str) -> Cursor | None:
        row = conn.execute(self._lock, {"name": name}).mappings().first()
        return None if row is None else cursor_from_row(row, xid=int(row["xid"]))

    def scan(
        self, conn: Connection, tables: Tables, cursor: Cursor, types: Sequence[str], limit: int
    ) -> Scan:
        params = {"gaps": [gap.id for gap in cursor.gaps], "position": cursor.position}
        # Plain rows (the columns in _EVENT_COLUMNS' order, then xmin): this is the hot loop
        # of a consumer catching up.
        rows = conn.execute(self._scan, {**params, "limit": limit}).all()
        xmin = int(rows[0][-1])
        visible = {row[0]: row for row in rows if row[0] is not None}
        wanted = frozenset(types)
        late: dict[int, Gap] = {}
        gaps: list[Gap] = []
        for gap in cursor.gaps:
            if gap.id in visible:
                if visible[gap.id][_TYPE] in wanted:
                    late[gap.id] = gap
                continue
            if gap.bound is None:
                # Drawn after the scan that found this gap (the previous pass committed).
                gaps.append(Gap(gap.id, cursor.xid))
            elif xmin < gap.bound:
                gaps.append(gap)
            # else: every transaction that could hold the id has ended; it never appears.
        fresh = sorted(event_id for event_id in visible if event_id > cursor.position)
        position = fresh[-1] if fresh else cursor.position
        if len(fresh) != position - cursor.position:
            seen = set(fresh)
            gaps += [Gap(i) for i in range(cursor.position + 1, position) if i not in seen]
        events = [
            StoredEvent(*visible[event_id][:_WIDTH])
            for event_id in sorted([*late, *fresh])
            if visible[event_id][_TYPE] in wanted
        ]
        return Scan(
            cursor.position, events, position, tuple(gaps), late, tuple(gaps) != cursor.gaps
        )


class SqliteVisibility:
    """One writer at a time (taken at BEGIN): committed ids only ever grow, no gaps."""

    def lock(self, conn: Connection, tables: Tables, name: str) -> Cursor | None:
        # The pass's BEGIN IMMEDIATE holds the database's write lock: no other pass or
        # writer runs until it commits (SQLite has no row locks; FOR UPDATE is left out).
        return lock_cursor_row(conn, tables, name, skip_locked=True)

    def scan(
        self, conn: Connection, tables: Tables, cursor: Cursor, types: Sequence[str], limit: int
    ) -> Scan:
        events = tables.events
        query = (
            events.select()
            .where(events.c.id > cursor.position, events.c.type.in_(list(types)))
            .order_by(events.c.id)
            .limit(limit)
        )
        found = [_stored(row) for row in conn.execute(query).mappings()]
        position = found[-1].id if found else cursor.position
        return Scan(cursor.position, found, position, ())


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
