"""A row waiting for its key costs nothing while it waits: the end of the attempt that holds
the key wakes the next row (one delivery per freed slot); nothing polls the waiting rows."""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from typing import Any

from sqlalchemy import select

from asanoha import Concurrency
from asanoha.platform.jobs.clocks import WAKE_LOST_AFTER
from asanoha.platform.model import Feature
from tests.integration.workers.conftest import job_rows, job_runs

ROWS = 30


def _counting_claims(stack: Any) -> Counter[uuid.UUID]:
    """Count the deliveries that reach a claim, per row, in the stack's worker."""
    rows = stack.app.celery_jobs.runner._rows
    claim = rows.claim
    seen: Counter[uuid.UUID] = Counter()
    lock = threading.Lock()

    def counted(row_id: uuid.UUID, attempt: int, *args: Any, **kwargs: Any) -> Any:
        with lock:
            seen[row_id] += 1
        return claim(row_id, attempt, *args, **kwargs)

    rows.claim = counted
    return seen


def test_rows_behind_one_sequential_key_are_delivered_about_once_each(jobs_stack):
    feature = Feature("behind")
    release = threading.Event()
    started = threading.Event()
    order: list[int] = []

    @feature.job("apply", manual=True, concurrency=Concurrency.sequential(key=["account"]))
    def apply(payload: dict[str, Any], ctx: Any) -> None:
        if payload["n"] == 0:
            started.set()
            assert release.wait(30)
        order.append(payload["n"])

    stack = jobs_stack([feature])
    deliveries = _counting_claims(stack)
    qn = "behind:job:apply"
    first = stack.app.jobs.run(qn, {"account": "a", "n": 0})
    assert started.wait(30)
    later = [stack.app.jobs.run(qn, {"account": "a", "n": n}) for n in range(1, ROWS)]
    # Behind a running holder, each row waits unpublished, with no relay time before the
    # recovery of a lost wake.
    outbox = stack.tables.outbox
    with stack.db.connect() as conn:
        waiting = conn.execute(select(outbox).where(outbox.c.id.in_(later))).all()
    assert {(row.state, row.claim_token, row.published_at) for row in waiting} == {
        ("pending", "waiting", None)
    }
    assert all(
        (row.relay_after - row.created_at).total_seconds() >= WAKE_LOST_AFTER - 1 for row in waiting
    )
    release.set()
    summary = stack.drain(timeout=120)
    assert summary.succeeded == ROWS
    assert order == list(range(ROWS))
    assert {run.attempt for run in job_runs(stack, qn)} == {1}
    total = sum(deliveries[row_id] for row_id in [first, *later])
    assert total <= 1.1 * ROWS, deliveries
    assert {row.state for row in job_rows(stack, qn)} == {"succeeded"}


def test_a_cancelled_waiting_row_is_passed_over_by_the_wake(jobs_stack):
    feature = Feature("unblock")
    release = threading.Event()
    started = threading.Event()
    ran: list[int] = []

    @feature.job("apply", manual=True, concurrency=Concurrency.sequential())
    def apply(payload: dict[str, Any], ctx: Any) -> None:
        if payload["n"] == 0:
            started.set()
            assert release.wait(30)
        ran.append(payload["n"])

    stack = jobs_stack([feature])
    qn = "unblock:job:apply"
    stack.app.jobs.run(qn, {"n": 0})
    assert started.wait(30)
    second = stack.app.jobs.run(qn, {"n": 1})
    third = stack.app.jobs.run(qn, {"n": 2})
    stack.app.jobs.cancel(second)
    release.set()
    stack.drain(timeout=60)
    assert ran == [0, 2]
    states = {row.id: row.state for row in job_rows(stack, qn)}
    assert (states[second], states[third]) == ("cancelled", "succeeded")
