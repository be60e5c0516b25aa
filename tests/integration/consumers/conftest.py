"""The consumer suite: one feature factory, helpers to append events in chosen transactions,
and a stack fixture on Postgres and SQLite."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel
from sqlalchemy import Connection

from asanoha import Access, Backoff, Entity, Feature, fields
from asanoha.platform.consumers import ConsumerContext
from asanoha.platform.model import ConsumerStart
from asanoha.platform.store import StoredEvent, append_event, stream_version
from asanoha.testing import Stack
from asanoha.testing.plugin import StackFactory

TENANT = "tenant-a"
ADMIN = Access(roles=["Admin"])
Handler = Callable[[StoredEvent, ConsumerContext], None]
#: Attempts at a failing event one after the other (what most tests here want).
NO_BACKOFF = Backoff.fixed(0)
#: Seconds of a drain that must run out, but only after a consumer pass started (or finished)
#: in it: a bound generous enough for a loaded machine, not a guess of its speed.
EXPIRING_DRAIN = 5


class Posted(BaseModel):
    n: int


class Post(BaseModel):
    stream: str
    n: int


def ledger(
    handler: Handler | None = None,
    *,
    name: str = "ledger",
    max_attempts: int = 3,
    start: ConsumerStart = "beginning",
    backoff: Backoff = NO_BACKOFF,
    raw_sql: str | None = None,
    partitions: int = 1,
    toggleable: bool = False,
) -> Feature:
    """A feature with an entity (``entry``), a domain event (``posted``), a write that appends
    it (``post``) and a consumer ``follow`` of ``posted`` calling ``handler`` (by default
    without a wait between attempts, with ``raw_sql`` as declared)."""
    feature = Feature(name, toggleable=toggleable)
    feature.entity(
        "entry",
        Entity(
            table=f"{name}_entries",
            fields={
                "note": fields.text(personal=False, reason="fixture"),
                "event_id": fields.integer(),
            },
        ),
    )
    posted = feature.event("posted", Posted)

    @feature.write_handler("post", access=ADMIN)
    def post(payload: Post, ctx: Any) -> int:
        return int(ctx.append_event(posted, {"n": payload.n}, stream_id=payload.stream).id)

    @feature.consumer(
        "follow",
        on=[posted.qn],
        max_attempts=max_attempts,
        start=start,
        backoff=backoff,
        raw_sql=raw_sql,
        partitions=partitions,
    )
    def follow(event: StoredEvent, ctx: ConsumerContext) -> None:
        if handler is not None:
            handler(event, ctx)

    return feature


class Recorder:
    """A consumer handler that records what it was given (thread-safe)."""

    def __init__(self) -> None:
        self.events: list[StoredEvent] = []
        self.tenants: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, event: StoredEvent, ctx: ConsumerContext) -> None:
        with self._lock:
            self.events.append(event)
            self.tenants.append(ctx.tenant_id)

    @property
    def ids(self) -> list[int]:
        with self._lock:
            return [event.id for event in self.events]


def append(
    stack: Stack,
    stream: str,
    n: int = 0,
    *,
    conn: Connection | None = None,
    feature: str = "ledger",
    tenant: str = TENANT,
) -> StoredEvent:
    """Append ``<feature>:event:posted`` to ``stream`` at its next committed version, on
    ``conn`` (an open transaction the caller ends) or in a transaction of its own."""
    if conn is None:
        with stack.db.begin() as own:
            return append(stack, stream, n, conn=own, feature=feature, tenant=tenant)
    version = stream_version(conn, stack.tables, tenant, stream)
    return append_event(
        conn,
        stack.db.backend,
        stack.tables,
        tenant_id=tenant,
        stream_id=stream,
        stream_type=feature,
        expected_version=version,
        type=f"{feature}:event:posted",
        payload={"n": n},
        metadata={},
        created_by="test",
    )


@pytest.fixture(params=["postgres", "sqlite"])
def database(request: pytest.FixtureRequest) -> str:
    """The database the consumer suite runs on."""
    kind: str = request.param
    return kind


@pytest.fixture
def consumer_stack(asanoha_stack: StackFactory, database: str) -> Callable[..., Stack]:
    """``consumer_stack(features, **kwargs)``: a stack on the parametrized database."""

    def make(features: list[Feature], **kwargs: Any) -> Stack:
        return asanoha_stack(features=features, database=database, **kwargs)  # type: ignore[arg-type]

    return make
