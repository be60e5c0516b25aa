"""Stored events in the newest shape: every read path passes its events through ``upcast``.

An event keeps the ``schema_version`` it was written with; a read brings its payload to the
version the code declares (``feature.event(..., version=N, upcasters={...})`` and
``Entity(..., version=N, upcasters={...})``). ``check_stored_versions`` is the boot check: a
stored version the code cannot bring to its own (older than its chain of upcasters, or newer
than the code) stops ``serve``, ``worker``, ``migrate`` and ``App.create_schema``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import func, literal, select, union_all

from asanoha.platform.model import Registry
from asanoha.platform.model.versions import PayloadUpcaster, oldest_readable

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from asanoha.platform.store.events import StoredEvent
    from asanoha.platform.store.tables import Tables


@dataclass(frozen=True)
class EventShape:
    """The version an event type is written with and the upcasters from older versions."""

    type: str
    version: int
    upcasters: Mapping[int, PayloadUpcaster]
    #: Top-level payload keys no reader gets (see ``EventDef.retired_keys``).
    retired: frozenset[str] = frozenset()

    @property
    def oldest(self) -> int:
        """The oldest stored version the upcasters bring to ``version``."""
        return oldest_readable(self.version, self.upcasters)

    def unreadable(self, stored_version: int) -> str | None:
        """Why a stored event of ``stored_version`` cannot be read, or ``None`` if it can."""
        if stored_version > self.version:
            return (
                f"stored events of type {self.type!r} have version {stored_version}, newer "
                f"than the code's version {self.version} (is this code older than what wrote "
                "them?)"
            )
        if stored_version < self.oldest:
            return (
                f"stored events of type {self.type!r} have version {stored_version}, and the "
                f"code has no upcaster for version {self.oldest - 1} (declare "
                f"upcasters={{{self.oldest - 1}: ...}} with version={self.version})"
            )
        return None


class UnreadableEventVersionError(RuntimeError):
    """Stored events have a version the code cannot bring to its own."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = tuple(problems)
        super().__init__("; ".join(self.problems))


@dataclass(frozen=True)
class Upcasters:
    """The shapes of a registry's event types, by type."""

    shapes: Mapping[str, EventShape]

    def upcast(self, event: StoredEvent) -> StoredEvent:
        """``event`` with its payload in the newest shape of its type (types the code does
        not declare pass as stored)."""
        shape = self.shapes.get(event.type)
        if shape is None:
            return event
        payload = event.payload
        if shape.retired and not shape.retired.isdisjoint(payload):
            # Before the upcasters: they never see what no reader gets.
            payload = {key: value for key, value in payload.items() if key not in shape.retired}
        if event.schema_version == shape.version:
            return (
                event if payload is event.payload else dataclasses.replace(event, payload=payload)
            )
        problem = shape.unreadable(event.schema_version)
        if problem is not None:
            raise UnreadableEventVersionError([f"event {event.id}: {problem}"])
        for read in range(event.schema_version, shape.version):
            payload = shape.upcasters[read](payload)
        return dataclasses.replace(event, payload=payload, schema_version=shape.version)

    def upcast_all(self, events: list[StoredEvent]) -> list[StoredEvent]:
        """Each of ``events`` upcast (see ``upcast``)."""
        if not self.shapes:
            return events
        return [self.upcast(event) for event in events]


#: Upcasters of a registry without events.
NO_UPCASTERS = Upcasters({})


def upcasters_for(registry: Registry) -> Upcasters:
    """The shapes of every event type the registry declares."""
    return Upcasters(
        {
            event.qn: EventShape(
                event.qn, event.schema_version, event.upcasters, event.retired_keys
            )
            for event in registry.events
        }
    )


def upcast(tables: Tables, event: StoredEvent) -> StoredEvent:
    """``event`` in the newest shape of its type, for the registry ``tables`` were built of."""
    return tables.upcasters.upcast(event)


def check_stored_versions(conn: Connection, tables: Tables) -> None:
    """Raise ``UnreadableEventVersionError`` naming each event type and stored version the
    code cannot read.

    One statement: the lowest and highest stored version of each declared type, each found
    through the index on (type, schema_version) rather than by reading the type's events.
    """
    shapes = list(tables.upcasters.shapes.values())
    if not shapes:
        return
    events = tables.events
    parts = []
    for shape in shapes:
        of_type = events.c.type == shape.type
        lowest = select(func.min(events.c.schema_version)).where(of_type).scalar_subquery()
        highest = select(func.max(events.c.schema_version)).where(of_type).scalar_subquery()
        parts.append(
            select(
                literal(shape.type).label("type"), lowest.label("lowest"), highest.label("highest")
            )
        )
    problems = []
    for type_, lowest, highest in conn.execute(union_all(*parts)).all():
        if lowest is None:
            continue
        shape = tables.upcasters.shapes[type_]
        for stored in sorted({int(lowest), int(highest)}):
            problem = shape.unreadable(stored)
            if problem is not None:
                problems.append(problem)
    if problems:
        raise UnreadableEventVersionError(problems)
