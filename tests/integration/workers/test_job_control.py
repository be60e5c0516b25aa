"""Job control on the job row: cancel (pending and running), snooze, delays and ``at``."""

from __future__ import annotations

import datetime as dt
import threading
import time
import uuid
from typing import Any

import pytest
from sqlalchemy import select

from asanoha import Snooze
from asanoha.platform.errors import ConflictError, NotFoundError
from asanoha.platform.model import Feature
from asanoha.platform.service import OutboxMessage
from tests.integration.workers.conftest import job_runs

LOOP = "control:job:loop"
NOTE = "control:job:note"
NAP = "control:job:nap"
CHAIN = "control:job:chain"


class Seen:
    """What the jobs of ``control_feature`` saw, across the worker's threads."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.calls: list[tuple[str, int, float]] = []
        self.naps = 1

    def note(self, job: str, attempt: int) -> None:
        self.calls.append((job, attempt, time.monotonic()))


def control_feature(seen: Seen) -> Feature:
    feature = Feature("control")

    @feature.job("loop", manual=True, retries=2)
    def loop(payload: dict[str, Any], ctx: Any) -> None:
        seen.note("loop", ctx.attempt)
        seen.started.set()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            ctx.checkpoint()
            time.sleep(0.05)
        raise RuntimeError("never cancelled")

    @feature.job("note", manual=True)
    def note(payload: dict[str, Any], ctx: Any) -> None:
        seen.note("note", ctx.attempt)

    @feature.job("nap", manual=True, retries=1)
    def nap(payload: dict[str, Any], ctx: Any) -> Any:
        seen.note("nap", ctx.attempt)
        if seen.naps > 0:
            seen.naps -= 1
            if payload.get("raise"):
                raise Snooze(payload["seconds"])
            return Snooze(payload["seconds"])
        return None

    @feature.job("chain", manual=True)
    def chain(payload: dict[str, Any], ctx: Any) -> None:
        seen.note("chain", ctx.attempt)
        at = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=payload["seconds"])
        ctx.dispatch(NOTE, {}, at=at)

    return feature


def row_of(stack: Any, row_id: Any) -> Any:
    outbox = stack.tables.outbox
    with stack.db.connect() as conn:
        return conn.execute(select(outbox).where(outbox.c.id == row_id)).one()


def test_a_cancelled_pending_job_never_runs_even_when_its_message_arrives(jobs_stack):
    seen = Seen()
    stack = jobs_stack([control_feature(seen)])
    job_id = stack.app.jobs.run(NOTE, delay=3600)
    cancelled = stack.app.jobs.cancel(job_id)
    assert (cancelled.id, cancelled.job_qn, cancelled.state) == (job_id, NOTE, "cancelled")
    row = row_of(stack, job_id)
    assert (row.state, row.attempt) == ("cancelled", 0)
    assert row.finished_at is not None
    # A message delivered after the cancel is acknowledged without running.
    stack.app.celery_jobs.publisher.publish(OutboxMessage(job_id, NOTE, attempt=1))
    summary = stack.drain()
    assert seen.calls == []
    assert (summary.succeeded, summary.failed, summary.cancelled) == (0, 0, 0)
    assert row_of(stack, job_id).state == "cancelled"


def test_a_running_job_cancelled_stops_at_its_checkpoint_without_a_retry(jobs_stack):
    seen = Seen()
    stack = jobs_stack([control_feature(seen)])
    job_id = uuid.UUID(stack.dispatch_job(LOOP, {}))
    assert seen.started.wait(10)
    requested = stack.app.jobs.cancel(job_id)
    assert requested.state == "running"
    # Not a failure for drain(), and none of its two retries runs.
    summary = stack.drain()
    assert (summary.failed, summary.retried, summary.cancelled) == (0, 0, 1)
    assert [attempt for _, attempt, _ in seen.calls] == [1]
    row = row_of(stack, job_id)
    assert (row.state, row.attempt, row.cancel_requested) == ("cancelled", 1, True)
    [run] = job_runs(stack, LOOP)
    assert (run.status, run.attempt) == ("cancelled", 1)
    assert run.error.startswith("JobCancelled: ")


def test_cancelling_a_finished_or_unknown_job_is_refused_and_writes_nothing(jobs_stack):
    seen = Seen()
    stack = jobs_stack([control_feature(seen)])
    job_id = uuid.UUID(stack.dispatch_job(NOTE, {}))
    stack.drain()
    with stack.nothing_written(), pytest.raises(ConflictError) as refused:
        stack.app.jobs.cancel(job_id)
    assert (refused.value.http_status, refused.value.reason) == (409, "job_not_cancellable")
    assert refused.value.details == {"id": str(job_id), "job": NOTE, "state": "succeeded"}
    with stack.nothing_written(), pytest.raises(NotFoundError) as unknown:
        stack.app.jobs.cancel(uuid.uuid4())
    assert unknown.value.reason == "job_row_not_found"


@pytest.mark.parametrize("how", ["returned", "raised"])
def test_a_snoozed_job_runs_again_later_without_spending_an_attempt(jobs_stack, how):
    seen = Seen()
    stack = jobs_stack([control_feature(seen)])
    job_id = uuid.UUID(stack.dispatch_job(NAP, {"seconds": 1.0, "raise": how == "raised"}))
    summary = stack.drain()
    assert (summary.succeeded, summary.snoozed, summary.retried) == (1, 1, 0)
    [(_, first, at_first), (_, second, at_second)] = seen.calls
    # The same attempt twice: the snooze spent none (the job still has its one retry).
    assert (first, second) == (1, 1)
    assert at_second - at_first >= 1.0
    assert [(run.attempt, run.status) for run in job_runs(stack, NAP)] == [
        (1, "snoozed"),
        (1, "succeeded"),
    ]
    row = row_of(stack, job_id)
    assert (row.state, row.attempt) == ("succeeded", 1)


def test_a_snooze_longer_than_the_broker_holds_waits_in_the_row(jobs_stack):
    seen = Seen()
    stack = jobs_stack([control_feature(seen)], broker_countdown_max=0.2)
    stack.dispatch_job(NAP, {"seconds": 1.0})
    stack.drain()
    [(_, _, at_first), (_, _, at_second)] = seen.calls
    assert at_second - at_first >= 1.0


@pytest.mark.parametrize("hold", [60.0, 0.2])
def test_a_delayed_job_starts_no_earlier_than_its_delay(jobs_stack, hold):
    # hold 60: the broker holds the countdown; 0.2: the row holds it, the relay publishes.
    seen = Seen()
    stack = jobs_stack([control_feature(seen)], broker_countdown_max=hold)
    enqueued = time.monotonic()
    job_id = stack.dispatch_job(NOTE, {}, delay=1.5)
    row = row_of(stack, uuid.UUID(job_id))
    assert (row.published_at is None) == (hold < 1.5)
    stack.drain()
    [(_, _, started)] = seen.calls
    assert started - enqueued >= 1.5


def test_a_job_dispatched_at_a_time_starts_no_earlier(jobs_stack):
    seen = Seen()
    stack = jobs_stack([control_feature(seen)])
    stack.dispatch_job(CHAIN, {"seconds": 1.5})
    stack.drain()
    [(_, _, chained), (job, _, started)] = seen.calls
    assert job == "note"
    assert started - chained >= 1.5


def test_delay_and_at_together_are_refused_and_write_nothing(jobs_stack):
    stack = jobs_stack([control_feature(Seen())])
    at = dt.datetime.now(dt.UTC)
    with stack.nothing_written(), pytest.raises(ValueError, match=f"{NOTE}: pass delay= or at="):
        stack.app.jobs.run(NOTE, delay=1, at=at)
    with stack.nothing_written(), pytest.raises(ValueError, match="at= is a datetime with a time"):
        stack.app.service.enqueue_job(
            NOTE, {}, stack.app.jobs._operator(), at=at.replace(tzinfo=None)
        )
    with stack.nothing_written(), pytest.raises(ValueError, match="delay= is a number"):
        stack.dispatch_job(NOTE, {}, delay=-1)


def test_cancel_and_snooze_hold_on_sqlite_too(asanoha_stack):
    seen = Seen()
    stack = asanoha_stack(features=[control_feature(seen)], jobs=True, database="sqlite")
    job_id = uuid.UUID(stack.dispatch_job(LOOP, {}))
    assert seen.started.wait(10)
    assert stack.app.jobs.cancel(job_id).state == "running"
    stack.dispatch_job(NAP, {"seconds": 0.5})
    summary = stack.drain()
    assert (summary.cancelled, summary.snoozed, summary.failed) == (1, 1, 0)
    assert row_of(stack, job_id).state == "cancelled"
    assert [attempt for job, attempt, _ in seen.calls if job == "nap"] == [1, 1]
