"""A failing event stops the consumer there: effects roll back, attempts count, dead at
``max_attempts``; drain names it; restart and skip; exactly-once database effects."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from sqlalchemy import create_engine, select, text
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.pool import NullPool

from asanoha.platform.consumers import ConsumerContext, ConsumerDeadError
from asanoha.platform.errors import ConflictError, NotFoundError
from asanoha.platform.store import StoredEvent
from tests.integration.consumers.conftest import EXPIRING_DRAIN, append, ledger

FOLLOW = "ledger:consumer:follow"


class Poisoned:
    """Writes an entry per event, and fails (after writing) on events whose n is poisoned."""

    def __init__(self, *poison: int) -> None:
        self.poison = set(poison)
        self.calls: list[int] = []

    def __call__(self, event: StoredEvent, ctx: ConsumerContext) -> None:
        self.calls.append(event.id)
        ctx.entity("entry").create({"note": "seen", "event_id": event.id})
        if event.payload["n"] in self.poison:
            raise ValueError(f"cannot book n={event.payload['n']}")


def entry_event_ids(stack: Any) -> list[int]:
    table = stack.tables.entity("ledger:entry")
    with stack.db.connect() as conn:
        return sorted(conn.execute(select(table.c.event_id)).scalars())


def test_a_failing_event_stops_the_pass_and_rolls_back_only_its_own_effects(consumer_stack):
    handler = Poisoned(2)
    stack = consumer_stack([ledger(handler)])
    first, poison, third = (append(stack, "s", n) for n in (1, 2, 3))
    stack.consumers.run_once()
    assert handler.calls == [first.id, poison.id]
    assert entry_event_ids(stack) == [first.id]
    [status] = stack.consumers.status()
    assert (status.status, status.attempts, status.event_id) == ("idle", 1, poison.id)
    assert status.last_error == "ValueError: cannot book n=2"
    assert status.lag == 2
    assert third.id not in handler.calls


def test_a_poison_event_kills_the_consumer_drain_names_it_restart_and_skip(consumer_stack):
    handler = Poisoned(2)
    stack = consumer_stack([ledger(handler, max_attempts=3)])
    first, poison, third = (append(stack, "s", n) for n in (1, 2, 3))
    with pytest.raises(ConsumerDeadError) as raised:
        stack.drain(timeout=10)
    message = str(raised.value)
    assert FOLLOW in message and f"event {poison.id}" in message
    assert "ValueError: cannot book n=2" in message
    assert handler.calls.count(poison.id) == 3
    [status] = stack.consumers.status()
    assert (status.status, status.attempts, status.event_id) == ("dead", 3, poison.id)
    # Dead: passes leave it alone.
    stack.consumers.run_once()
    assert handler.calls.count(poison.id) == 3

    # Restart: fresh attempts at the same event.
    stack.consumers.restart(FOLLOW)
    assert stack.consumers.status()[0].status == "idle"
    stack.consumers.run_once()
    assert handler.calls.count(poison.id) == 4
    with pytest.raises(ConsumerDeadError):
        stack.drain(timeout=10)

    # Skip: past the poison event, recorded; delivery goes on.
    assert stack.consumers.skip(FOLLOW) == poison.id
    stack.drain(timeout=10)
    assert entry_event_ids(stack) == [first.id, third.id]
    [status] = stack.consumers.status()
    assert (status.status, status.attempts, status.event_id, status.lag) == ("idle", 0, None, 0)
    with stack.db.connect() as conn:
        skipped = conn.execute(
            select(stack.tables.consumers.c.skipped).where(stack.tables.consumers.c.name == FOLLOW)
        ).scalar_one()
    assert [(s["event_id"], s["error"]) for s in skipped] == [
        (poison.id, "ValueError: cannot book n=2")
    ]


def test_a_transient_failure_is_retried_and_succeeds(consumer_stack):
    failures = [1]

    def handler(event: StoredEvent, ctx: ConsumerContext) -> None:
        ctx.entity("entry").create({"note": "once", "event_id": event.id})
        if failures:
            failures.pop()
            raise RuntimeError("database of a partner is down")

    stack = consumer_stack([ledger(handler)])
    event = append(stack, "s")
    stack.drain(timeout=10)
    assert entry_event_ids(stack) == [event.id]
    [status] = stack.consumers.status()
    assert (status.attempts, status.event_id, status.last_error) == (0, None, None)


def test_skip_and_restart_answer_clearly_for_a_consumer_not_stopped_or_unknown(consumer_stack):
    stack = consumer_stack([ledger()])
    with pytest.raises(ConflictError) as raised:
        stack.consumers.skip(FOLLOW)
    assert raised.value.reason == "consumer_not_stopped"
    with pytest.raises(NotFoundError) as missing:
        stack.consumers.restart("ledger:consumer:nope")
    assert missing.value.reason == "consumer_not_found"


def test_a_crash_after_the_handler_leaves_neither_effect_nor_advance_and_redelivery_writes_once(
    asanoha_stack,
):
    # The pass's connection dies after the handler wrote its row, before the commit.
    stack = asanoha_stack(features=[ledger(lambda e, c: None)])
    killer = create_engine(stack.db.url, poolclass=NullPool)
    crashes = [1]
    calls: list[int] = []

    def handler(event: StoredEvent, ctx: ConsumerContext) -> None:
        calls.append(event.id)
        ctx.entity("entry").create({"note": "effect", "event_id": event.id})
        if crashes:
            crashes.pop()
            pid = ctx.sql.execute("SELECT pg_backend_pid()").scalar_one()
            with killer.connect() as other:
                other.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})

    stack = asanoha_stack(features=[ledger(handler, raw_sql="asks for its backend's pid")])
    event = append(stack, "s")
    try:
        with pytest.raises(OperationalError):
            stack.consumers.run_once()
        assert entry_event_ids(stack) == []
        assert stack.consumers.status()[0].lag == 1
        stack.consumers.run_once()
    finally:
        killer.dispose()
    assert calls == [event.id, event.id]
    assert entry_event_ids(stack) == [event.id]
    assert stack.consumers.status()[0].lag == 0


def test_drain_without_jobs_waits_for_consumers_and_reports_lag_on_timeout(consumer_stack):
    stack = consumer_stack([ledger()])
    append(stack, "s")
    stack.drain(timeout=10)
    assert stack.consumers.status()[0].lag == 0
    stack.consumers.disable(FOLLOW)
    append(stack, "s")
    # Disabled consumers are not waited for.
    stack.drain(timeout=10)


def test_a_drain_timeout_lists_consumers_behind_with_their_lag(consumer_stack):
    # Failing but with attempts to spare: behind, not dead, until the deadline.
    stack = consumer_stack([ledger(Poisoned(1), max_attempts=1_000_000)])
    append(stack, "s", 1)
    append(stack, "s", 2)
    with pytest.raises(AssertionError) as raised:
        stack.drain(timeout=EXPIRING_DRAIN)
    assert f"consumers behind: {FOLLOW} (lag 2; stopped at event " in str(raised.value)
    assert "ValueError: cannot book n=1" in str(raised.value)


def test_a_handler_that_catches_a_database_error_is_recorded_failed_and_keeps_nothing(
    asanoha_stack,
):
    # On Postgres the error aborts the transaction: the handler returns normally, but what it
    # did cannot commit. It is an attempt that failed, not a pass that crashes forever.
    def handler(event: StoredEvent, ctx: ConsumerContext) -> None:
        ctx.entity("entry").create({"note": "before", "event_id": event.id})
        with contextlib.suppress(DBAPIError):
            ctx.sql.execute("SELECT 1 / 0")

    stack = asanoha_stack(
        features=[ledger(handler, max_attempts=2, raw_sql="runs a statement that fails")]
    )
    event = append(stack, "s")
    stack.consumers.run_once()
    [status] = stack.consumers.status()
    assert (status.status, status.attempts, status.event_id) == ("idle", 1, event.id)
    assert status.last_error is not None
    assert status.last_error.startswith(
        "HandlerReturnedAfterDatabaseError: the handler returned, but a database error it "
        "caught had aborted its transaction"
    )
    with pytest.raises(ConsumerDeadError):
        stack.drain(timeout=10)
    assert entry_event_ids(stack) == []
