"""Cursor rows in ``asanoha_consumers``: one per partition of a consumer (one for most), read
and written inside a pass."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from sqlalchemy import Connection, select, update

from asanoha.platform.personal import redaction
from asanoha.platform.store import Tables

ConsumerStatusName = Literal["idle", "dead", "disabled"]
#: Longest error text kept on a cursor row.
MAX_ERROR_LENGTH = 2000


@dataclass(frozen=True)
class Gap:
    """A range of event ids below the position (``first`` to ``last``, both included) that
    were not visible when the consumer passed them.

    Their writers may still commit them (then they are delivered late) or may have rolled
    back (then the ids never appear). ``bound`` is a transaction id above every transaction
    that could hold one of them, or ``None`` until the next pass has drawn one (see
    ``visibility``). A range, not an id each, so a rollback of 50,000 appends costs one entry.
    """

    first: int
    last: int
    bound: int | None = None

    @property
    def size(self) -> int:
        """How many ids the range holds."""
        return self.last - self.first + 1

    def __contains__(self, event_id: object) -> bool:
        return isinstance(event_id, int) and self.first <= event_id <= self.last

    def without(self, ids: Iterable[int]) -> list[Gap]:
        """The parts of this range that are left once ``ids`` (sorted) are taken out."""
        parts: list[Gap] = []
        first = self.first
        for event_id in ids:
            if event_id < first or event_id > self.last:
                continue
            if event_id > first:
                parts.append(Gap(first, event_id - 1, self.bound))
            first = event_id + 1
        if first <= self.last:
            parts.append(Gap(first, self.last, self.bound))
        return parts


@dataclass(frozen=True)
class Cursor:
    """A consumer's row (one of its partitions) as a pass locked it."""

    name: str
    position: int
    gaps: tuple[Gap, ...]
    status: ConsumerStatusName
    attempts: int
    event_id: int | None
    last_error: str | None
    #: The event types it follows, as registered.
    types: tuple[str, ...] = ()
    #: The locking transaction's id (Postgres); ``None`` on SQLite.
    xid: int | None = None
    skipped: tuple[dict[str, Any], ...] = field(default=())
    #: When the next attempt at ``event_id`` may start; ``None``: now (or dead).
    retry_at: dt.datetime | None = None
    #: What ``enable`` restores when the consumer is disabled (``None``: idle).
    resume_status: ConsumerStatusName | None = None
    #: Which partition of the consumer this row is, and how many it has: the row delivers
    #: the events whose ``partition_key % partitions`` is ``partition``.
    partition: int = 0
    partitions: int = 1

    def owns(self, partition_key: int) -> bool:
        """Whether an event with ``partition_key`` goes to this partition."""
        return self.partitions == 1 or partition_key % self.partitions == self.partition

    @property
    def gap_ids(self) -> int:
        """How many ids the gaps hold."""
        return sum(gap.size for gap in self.gaps)

    def waiting(self, now: dt.datetime) -> bool:
        """Whether the consumer is stopped at an event whose next attempt is not due yet."""
        return self.retry_at is not None and self.retry_at > now


def gaps_from_json(value: Any) -> tuple[Gap, ...]:
    """Gaps as stored: ``[[first, last, bound-or-null], ...]``; rows written before gaps were
    ranges hold ``[[id, bound-or-null], ...]`` and read the same."""
    gaps: list[Gap] = []
    for item in value or ():
        if len(item) == 2:
            first = last = int(item[0])
            bound = item[1]
        else:
            first, last, bound = int(item[0]), int(item[1]), item[2]
        gaps.append(Gap(first, last, None if bound is None else int(bound)))
    return tuple(gaps)


def gaps_to_json(gaps: Iterable[Gap]) -> list[list[int | None]]:
    """The stored form of ``gaps``."""
    return [[gap.first, gap.last, gap.bound] for gap in gaps]


def cursor_from_row(row: Any, xid: int | None = None) -> Cursor:
    """A ``Cursor`` from a selected ``asanoha_consumers`` row (a mapping)."""
    return Cursor(
        name=row["name"],
        position=int(row["position"]),
        gaps=gaps_from_json(row["gaps"]),
        status=row["status"],
        attempts=int(row["attempts"]),
        event_id=None if row["event_id"] is None else int(row["event_id"]),
        last_error=row["last_error"],
        types=tuple(row["types"] or ()),
        xid=xid,
        skipped=tuple(row["skipped"] or ()),
        retry_at=_aware(row["retry_at"]),
        resume_status=row["resume_status"],
        partition=int(row["partition"]),
        partitions=int(row["partitions"]),
    )


def read_cursors(
    conn: Connection, tables: Tables, names: Sequence[str] | None = None
) -> dict[str, list[Cursor]]:
    """The cursor rows of ``names`` (default: all), unlocked, by name, each consumer's in
    partition order (for status and lag)."""
    consumers = tables.consumers
    query = select(consumers).order_by(consumers.c.name, consumers.c.partition)
    if names is not None:
        query = query.where(consumers.c.name.in_(list(names)))
    found: dict[str, list[Cursor]] = {}
    for row in conn.execute(query).mappings():
        found.setdefault(row["name"], []).append(cursor_from_row(row))
    return found


def lock_cursor_row(
    conn: Connection, tables: Tables, name: str, *, skip_locked: bool, partition: int = 0
) -> Cursor | None:
    """Lock a cursor row (``FOR UPDATE``); ``None`` when it is missing, or locked by another
    transaction and ``skip_locked``. For operations; a pass locks through the visibility seam."""
    consumers = tables.consumers
    query = select(consumers).where(consumers.c.name == name, consumers.c.partition == partition)
    query = query.with_for_update(skip_locked=skip_locked)
    row = conn.execute(query).mappings().first()
    return None if row is None else cursor_from_row(row)


def lock_cursor_rows(conn: Connection, tables: Tables, name: str) -> list[Cursor]:
    """Lock every partition's row of ``name`` (``FOR UPDATE``, in partition order, waiting
    for running passes); empty when the consumer has none."""
    consumers = tables.consumers
    query = (
        select(consumers)
        .where(consumers.c.name == name)
        .order_by(consumers.c.partition)
        .with_for_update()
    )
    return [cursor_from_row(row) for row in conn.execute(query).mappings()]


def save_cursor(
    conn: Connection, tables: Tables, name: str, *, partition: int = 0, **values: Any
) -> None:
    """Update the cursor row of ``name``'s ``partition``; ``gaps`` may be given as ``Gap``
    values."""
    if "gaps" in values:
        values["gaps"] = gaps_to_json(values["gaps"])
    consumers = tables.consumers
    conn.execute(
        update(consumers)
        .where(consumers.c.name == name, consumers.c.partition == partition)
        .values(**values, updated_at=dt.datetime.now(dt.UTC))
    )


def describe_error(exc: BaseException) -> str:
    """The error text kept on the cursor row: type and message, bounded, without NUL, and
    without the personal values the pass revealed (see ``personal.redaction``)."""
    text = redaction.error_text(exc).replace("\x00", "")
    return text if len(text) <= MAX_ERROR_LENGTH else text[: MAX_ERROR_LENGTH - 1] + "…"


def _aware(value: dt.datetime | None) -> dt.datetime | None:
    # Rows read through a text() statement bypass the column type: SQLite gives naive UTC.
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=dt.UTC)
    return value
