"""Declared projections: a table of the application's own, kept from events of given types
(``@feature.projection("order-totals", table=..., on=[...])``).

``mode="inline"`` (the default) keeps the table in the transaction of each write that appends
one of the events; ``mode="async"`` keeps it through a consumer of its own
(``<feature>:consumer:projection-<name>``, ``partitions=N`` cursors), so a write does not wait
for it and the table lags by the consumer's lag.

The function is called with each event of those types and a target that names the table to
write (the live table in the write's transaction, or a rebuild's shadow table) and runs its
statements: ``func(event, target)``. It must write ``target.table``, never the table object it
was declared with, so that a rebuild replays into the shadow. Events reach it in their newest
version with personal values as stored (sealed), both in the write path and in a rebuild.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import Table

from asanoha.platform.errors import DefinitionError
from asanoha.platform.model.names import make_qn
from asanoha.platform.model.sync_callables import check_not_async

#: ``func(event, target)``: apply one event to ``target.table``.
ProjectionFunc = Callable[[Any, Any], None]
#: Where a projection is kept: in the write's transaction, or by a consumer of its own.
ProjectionMode = Literal["inline", "async"]


@dataclass(frozen=True)
class ProjectionDef:
    """A declared projection: its table, the event types it follows and its function."""

    qn: str
    feature: str
    table: Table
    on: tuple[str, ...]
    func: ProjectionFunc
    mode: ProjectionMode = "inline"
    #: Cursors of an async projection's consumer.
    partitions: int = 1

    @property
    def consumer_qn(self) -> str:
        """The consumer that keeps an async projection:
        ``<feature>:consumer:projection-<name>``."""
        return f"{self.feature}:consumer:projection-{self.qn.rsplit(':', 1)[-1]}"


def define_projection(
    feature: str,
    name: str,
    table: Any,
    on: Iterable[str],
    func: Any,
    mode: ProjectionMode = "inline",
    partitions: int = 1,
) -> ProjectionDef:
    """Check a declaration (``DefinitionError`` naming the projection) and build it."""
    qn = make_qn(feature, "projection", name)
    if not isinstance(table, Table):
        raise DefinitionError(f"{qn}: table= takes a sqlalchemy Table, not {type(table).__name__}")
    if table.name.startswith("asanoha_"):
        raise DefinitionError(f"{qn}: table names starting with 'asanoha_' are reserved")
    if not table.primary_key.columns:
        raise DefinitionError(f"{qn}: table {table.name!r} needs a primary key")
    types = tuple(on)
    if not types or len(set(types)) != len(types):
        raise DefinitionError(f"{qn}: on=[...] names each event type it follows once")
    if not callable(func):
        raise DefinitionError(f"{qn}: decorate a function func(event, target)")
    check_not_async(func, qn, "projection", "projections run inside a database transaction")
    if mode not in ("inline", "async"):
        raise DefinitionError(f"{qn}: mode= is 'inline' or 'async', not {mode!r}")
    if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
        raise DefinitionError(f"{qn}: partitions must be a whole number >= 1, not {partitions!r}")
    if partitions > 1 and mode != "async":
        raise DefinitionError(
            f"{qn}: partitions= applies to the consumer of an async projection; "
            "declare mode='async' or drop it"
        )
    return ProjectionDef(
        qn=qn, feature=feature, table=table, on=types, func=func, mode=mode, partitions=partitions
    )
