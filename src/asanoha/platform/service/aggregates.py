"""Loading aggregates: a stream's events, opened and upcast, folded into the aggregate's state
(``ctx.load``), at a time or position (``as_of=``), from a snapshot when one is kept.

A snapshot holds the state's personal values as the events hold them: sealed under their
subject's key (``seal_known`` puts back the sealed text of every value the load opened), so
forgetting a subject makes its snapshots as unreadable as its events. A snapshot that holds a
value that no longer opens is discarded, and the state folded again from the events (where
the value reads ``FORGOTTEN``); a snapshot of another aggregate version is discarded too.

A state's personal values must be kept as the events gave them: a value derived from one
(upper-cased, joined with another) is not recognised as personal and would be kept as it is.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection

from asanoha.platform.errors import ConflictError, Reasons
from asanoha.platform.model import Registry
from asanoha.platform.model.aggregates import AggregateDef
from asanoha.platform.model.names import to_kebab
from asanoha.platform.personal import vault as personal_vault
from asanoha.platform.personal.sentinel import FORGOTTEN, FORGOTTEN_TEXT
from asanoha.platform.store.backends import Backend
from asanoha.platform.store.events import read_stream, stream_version_as_of
from asanoha.platform.store.snapshots import (
    Snapshot,
    discard_snapshots,
    latest_snapshot,
    save_snapshot,
)
from asanoha.platform.store.tables import Tables

#: ``as_of=``: a global position (an event id) or an aware datetime.
AsOf = int | dt.datetime


@dataclass(frozen=True)
class Loaded:
    """A folded state and where in its stream it stands."""

    #: The aggregate's state (``None`` for a stream without events, at ``as_of``).
    state: Any
    #: The stream version of the last event folded in (0: none).
    version: int
    #: How many events this load folded (the rest came from a snapshot).
    folded: int


class Aggregates:
    """Folds the declared aggregates of a registry."""

    def __init__(self, registry: Registry, tables: Tables, backend: Backend) -> None:
        self._registry = registry
        self._tables = tables
        self._backend = backend

    def find(self, name: str, *, feature: str, caller: str) -> AggregateDef:
        """Aggregate ``name`` of ``feature``, or ``other-feature:name``; ``LookupError``
        naming ``caller`` when none is declared."""
        scope, _, local = name.rpartition(":")
        key = f"{scope or feature}:{to_kebab(local)}"
        found = self._registry.find_aggregate(key)
        if found is None:
            raise LookupError(
                f"{caller}: no aggregate {name!r} is declared (looked for {key!r}); declare "
                "it with @feature.aggregate(...)"
            )
        return found

    def load(
        self,
        conn: Connection,
        aggregate: AggregateDef,
        *,
        tenant_id: str,
        stream_id: str,
        as_of: AsOf | None = None,
        read_only: bool = False,
    ) -> Loaded:
        """The state of ``stream_id`` folded by ``aggregate`` (at ``as_of``), from its newest
        usable snapshot and the events after it; a new snapshot is kept in ``conn``'s
        transaction once ``snapshot_every`` events were folded past the last one.
        ``read_only``: a query's load (its transaction may be read-only, on a replica) keeps
        no snapshot and discards none; the next write's or job's load does."""
        if isinstance(as_of, bool) or (isinstance(as_of, dt.datetime) and as_of.tzinfo is None):
            raise ValueError("as_of is an event position (int) or an aware datetime")
        through = None
        if as_of is not None:
            through = stream_version_as_of(conn, self._tables, tenant_id, stream_id, as_of)
            if through == 0:
                return Loaded(None, 0, 0)
        kept = None
        if aggregate.snapshot_every is not None:
            kept = self._usable_snapshot(
                conn, aggregate, tenant_id, stream_id, through, discard=not read_only
            )
        start = kept.stream_version if kept is not None else 0
        state = _restore(aggregate, kept.state) if kept is not None else aggregate.initial()
        events = read_stream(
            conn,
            self._tables,
            tenant_id=tenant_id,
            stream_id=stream_id,
            after_version=start,
            through_version=through,
        )
        if events and events[0].version != start + 1:
            # The events in between were pruned (``store/retention.py``): a fold without them
            # would be wrong, not old.
            raise ConflictError(
                Reasons.EVENTS_PRUNED,
                aggregate=aggregate.key,
                stream_id=stream_id,
                expected=start + 1,
                found=events[0].version,
            )
        for event in events:
            state = aggregate.fold(state, event)
        if not events and kept is None:
            return Loaded(None, 0, 0)
        version = events[-1].version if events else start
        every = aggregate.snapshot_every
        if every is not None and as_of is None and len(events) >= every and not read_only:
            self._keep(conn, aggregate, tenant_id, stream_id, state, version, events[-1].id)
        return Loaded(state, version, len(events))

    def _usable_snapshot(
        self,
        conn: Connection,
        aggregate: AggregateDef,
        tenant_id: str,
        stream_id: str,
        through: int | None,
        *,
        discard: bool,
    ) -> Snapshot | None:
        """The newest snapshot this aggregate can start from, opened; one of another
        aggregate version or holding a forgotten value is not used, and with ``discard``
        deleted (with the stream's other snapshots of the aggregate, which are older
        still)."""
        found = latest_snapshot(
            conn,
            self._tables,
            tenant_id=tenant_id,
            aggregate=aggregate.key,
            stream_id=stream_id,
            through_version=through,
        )
        if found is None:
            return None
        if found.aggregate_version == aggregate.version:
            opened = personal_vault.reveal(conn, found.state)
            if not _lost_a_value(found.state, opened):
                return Snapshot(
                    found.stream_version, found.position, found.aggregate_version, opened
                )
        if not discard:
            return None
        discard_snapshots(
            conn, self._tables, tenant_id=tenant_id, stream_id=stream_id, aggregate=aggregate.key
        )
        return None

    def _keep(
        self,
        conn: Connection,
        aggregate: AggregateDef,
        tenant_id: str,
        stream_id: str,
        state: Any,
        version: int,
        position: int,
    ) -> None:
        document = _state_document(aggregate, state)
        # The same sealed texts as the events this load opened: nothing personal is kept in
        # plain text, and forgetting the subject makes the snapshot unreadable with them.
        sealed = personal_vault.seal_known(conn, document)
        save_snapshot(
            conn,
            self._backend,
            self._tables,
            tenant_id=tenant_id,
            aggregate=aggregate.key,
            stream_id=stream_id,
            snapshot=Snapshot(version, position, aggregate.version, sealed),
        )


def _state_document(aggregate: AggregateDef, state: Any) -> Any:
    """The state as the JSON a snapshot keeps (a class's instance attributes)."""
    document = dict(vars(state)) if aggregate.form == "class" else state
    try:
        json.dumps(document)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"aggregate {aggregate.key}: snapshot_every needs a state of JSON values "
            f"({exc}); keep dates as ISO texts and amounts as numbers or texts"
        ) from exc
    return document


def _restore(aggregate: AggregateDef, document: Any) -> Any:
    """The state a snapshot's (opened) document describes."""
    document = _forgotten_marks(document)
    if aggregate.form == "fold":
        return document
    state = aggregate.target()
    vars(state).update(document)
    return state


def _forgotten_marks(value: Any) -> Any:
    """``value`` with each ``"[forgotten]"`` text read as ``FORGOTTEN``, as an event gives it."""
    if isinstance(value, str):
        return FORGOTTEN if value == FORGOTTEN_TEXT else value
    if isinstance(value, dict):
        return {key: _forgotten_marks(inner) for key, inner in value.items()}
    if isinstance(value, list):
        return [_forgotten_marks(inner) for inner in value]
    return value


def _lost_a_value(stored: Any, opened: Any) -> bool:
    """Whether a sealed text of ``stored`` opened as ``FORGOTTEN`` (its subject is gone)."""
    if opened is FORGOTTEN:
        return stored is not FORGOTTEN and stored != FORGOTTEN_TEXT
    if isinstance(stored, dict) and isinstance(opened, dict):
        return any(_lost_a_value(stored[key], opened.get(key)) for key in stored)
    if isinstance(stored, list) and isinstance(opened, list):
        return any(_lost_a_value(a, b) for a, b in zip(stored, opened, strict=False))
    return False
