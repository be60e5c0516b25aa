"""A row waiting for its key is not polled: should the wake of the end that frees the key be
lost (its worker died between the end and the wake), the relay sends the row after the
recovery time, and not before."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import pytest
from sqlalchemy import select

from asanoha import Concurrency
from asanoha.platform.jobs import clocks, enqueue, publishing
from asanoha.platform.jobs.attempts import AttemptEnd, Claim, ClaimLimit, job_rows_for
from asanoha.platform.jobs.message import OutboxMessage
from asanoha.platform.jobs.states import SUCCEEDED
from asanoha.platform.model import Feature

feature = Feature("lostwake")


@feature.job("apply", manual=True, concurrency=Concurrency.sequential())
def apply(payload: dict[str, Any], ctx: Any) -> None:
    return None


QN = "lostwake:job:apply"
#: Relay passes before the recovery time: a poll would have sent the row by the second.
RELAY_PASSES = (1.0, 60.0, 600.0)


class Sent:
    """A publisher that keeps what it was given."""

    def __init__(self) -> None:
        self.messages: list[OutboxMessage] = []

    def publish(self, message: OutboxMessage) -> None:
        self.messages.append(message)


@pytest.mark.parametrize("database", ["postgres", "sqlite"])
def test_a_lost_wake_is_recovered_by_the_relay_at_its_time(asanoha_stack, database, monkeypatch):
    stack = asanoha_stack(features=[feature], database=database)
    now = [dt.datetime.now(dt.UTC)]
    monkeypatch.setattr(clocks, "now", lambda: now[0])
    job = stack.app.registry.job(QN)
    rows = job_rows_for(stack.db, stack.tables)

    def place() -> uuid.UUID:
        message = OutboxMessage(uuid.uuid4(), QN, headers={"tenant_id": "default"})
        with stack.db.begin() as conn:
            placed = enqueue.place(conn, stack.tables, job, message)
        return placed.job_id

    first = place()
    claim = rows.claim(first, 1, limit=ClaimLimit.of(job))
    assert isinstance(claim, Claim)
    second = place()
    # The end frees the key; its wake is lost.
    assert rows.end(first, QN, "default", 1, claim, AttemptEnd("succeeded", SUCCEEDED))
    sent = Sent()
    for seconds in RELAY_PASSES:
        now[0] += dt.timedelta(seconds=seconds)
        publishing.relay_outbox(stack.db, stack.tables, sent, limit=10)
    assert sent.messages == []
    now[0] += dt.timedelta(seconds=clocks.WAKE_LOST_AFTER - sum(RELAY_PASSES) + 1)
    assert publishing.relay_outbox(stack.db, stack.tables, sent, limit=10) == 1
    assert [(message.id, message.attempt) for message in sent.messages] == [(second, 1)]
    # And the row it sent runs: the key is free.
    assert isinstance(rows.claim(second, 1, limit=ClaimLimit.of(job)), Claim)


@pytest.mark.parametrize("database", ["postgres", "sqlite"])
def test_a_woken_row_is_published_by_its_wake_and_relayed_when_its_publish_fails(
    asanoha_stack, database
):
    stack = asanoha_stack(features=[feature], database=database)
    job = stack.app.registry.job(QN)
    rows = job_rows_for(stack.db, stack.tables)
    ids = []
    for _ in range(2):
        message = OutboxMessage(uuid.uuid4(), QN, headers={"tenant_id": "default"})
        with stack.db.begin() as conn:
            ids.append(enqueue.place(conn, stack.tables, job, message).job_id)
    first, second = ids
    claim = rows.claim(first, 1, limit=ClaimLimit.of(job))
    assert isinstance(claim, Claim)
    ended, woken = rows.end_and_wake(first, QN, "default", 1, claim, AttemptEnd("ok", SUCCEEDED))
    assert ended and [row.id for row in woken] == [second]

    def published_at() -> Any:
        outbox = stack.tables.outbox
        with stack.db.connect() as conn:
            query = select(outbox.c.published_at).where(outbox.c.id == second)
            return conn.execute(query).scalar_one()

    # Marked published in the wake's own transaction: the waker sends it right after, and
    # the relay leaves it alone.
    assert published_at() is not None
    sent = Sent()
    assert publishing.relay_outbox(stack.db, stack.tables, sent, limit=10) == 0
    # The waker's publish failed: marked so, the relay sends it at once.
    (row,) = woken
    failed = OutboxMessage(row.id, row.job_qn, attempt=row.attempt, priority=row.priority)
    rows.mark_published([], [failed])
    assert published_at() is None
    assert publishing.relay_outbox(stack.db, stack.tables, sent, limit=10) == 1
    assert [(message.id, message.attempt) for message in sent.messages] == [(second, 1)]
