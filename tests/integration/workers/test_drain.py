"""``drain()``: waits for the whole cascade, reports final failures once, times out clearly."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from pydantic import BaseModel

from asanoha.platform.model import Access, Backoff, Feature
from asanoha.workers import DrainTimeoutError, JobFailedError
from tests.integration.workers.conftest import job_rows, job_runs


def test_a_job_failing_for_good_makes_drain_raise_once(jobs_stack):
    feature = Feature("failing")

    @feature.job("always", manual=True)
    def always(payload: dict[str, Any], ctx: Any) -> None:
        raise ValueError("the ledger is closed")

    stack = jobs_stack([feature])
    stack.dispatch_job("failing:job:always", {})
    with pytest.raises(JobFailedError) as raised:
        stack.drain()
    assert "failing:job:always: ValueError: the ledger is closed" in str(raised.value)
    assert raised.value.summary.failed == 1
    # Reported once: the next drain passes.
    assert stack.drain().failed == 0


def test_a_job_that_fails_once_then_succeeds_drains_cleanly(jobs_stack):
    feature = Feature("recovering")
    calls: list[int] = []

    @feature.job("second-time", manual=True, retries=1, backoff=Backoff.fixed(0.01))
    def second_time(payload: dict[str, Any], ctx: Any) -> None:
        calls.append(ctx.attempt)
        if ctx.attempt == 1:
            raise RuntimeError("transient")

    stack = jobs_stack([feature])
    stack.dispatch_job("recovering:job:second-time", {})
    summary = stack.drain()
    assert calls == [1, 2]
    assert (summary.succeeded, summary.retried, summary.failed) == (1, 1, 0)


def test_a_stack_with_jobs_but_no_job_definitions_fails_clearly(asanoha_stack, broker):
    feature = Feature("quiet")
    # The bundled agent feature (agent:write:approve) is listed too.
    with pytest.raises(RuntimeError, match=r"features \(quiet, agent\) define no job"):
        asanoha_stack(features=[feature], jobs=True)


def test_drain_on_a_stack_without_jobs_fails_clearly(asanoha_stack):
    stack = asanoha_stack(features=[Feature("quiet")])
    with pytest.raises(RuntimeError, match="jobs=True"):
        stack.drain()


class Order(BaseModel):
    item: str


def test_a_job_writing_into_a_handler_that_triggers_another_job_is_waited_for(jobs_stack):
    feature = Feature("cascade")
    shipped: list[str] = []

    @feature.write_handler("ship", access=Access(roles=["system"]))
    def ship(payload: Order, ctx: Any) -> dict[str, str]:
        return {"item": payload.item}

    @feature.job("start", manual=True)
    def start(payload: dict[str, Any], ctx: Any) -> None:
        ctx.write("cascade:write:ship", {"item": payload["item"]})

    @feature.job("notify", on="cascade:write:ship")
    def notify(payload: dict[str, Any], ctx: Any) -> None:
        shipped.append(f"{payload['item']} via {ctx.trigger_name} by {ctx.triggered_by}")

    stack = jobs_stack([feature])
    stack.dispatch_job("cascade:job:start", {"item": "kettle"})
    summary = stack.drain()
    assert shipped == ["kettle via cascade:write:ship by system"]
    assert summary.succeeded == 2
    assert sorted(r.job_qn for r in job_runs(stack)) == ["cascade:job:notify", "cascade:job:start"]


def test_a_job_dispatching_another_job_is_waited_for(jobs_stack):
    feature = Feature("chain")
    seen: list[str] = []

    @feature.job("first", manual=True)
    def first(payload: dict[str, Any], ctx: Any) -> None:
        ctx.dispatch("chain:job:second", {"n": payload["n"] + 1})

    @feature.job("second", manual=True)
    def second(payload: dict[str, Any], ctx: Any) -> None:
        seen.append(f"{payload['n']} from {ctx.trigger_name}")

    stack = jobs_stack([feature])
    stack.dispatch_job("chain:job:first", {"n": 1})
    stack.drain()
    assert seen == ["2 from chain:job:first"]


def test_a_retry_waiting_for_its_countdown_is_pending_work(jobs_stack):
    feature = Feature("waiting")

    @feature.job("later", manual=True, retries=1, backoff=Backoff.fixed(30))
    def later(payload: dict[str, Any], ctx: Any) -> None:
        if ctx.attempt == 1:
            raise RuntimeError("not yet")

    stack = jobs_stack([feature])
    stack.dispatch_job("waiting:job:later", {})
    # Long enough for the first attempt and the retry's reservation on a loaded machine,
    # well short of the countdown.
    with pytest.raises(DrainTimeoutError) as raised:
        stack.drain(timeout=5)
    pending = raised.value.pending
    assert pending.reserved == 1
    assert sum(pending.queued.values()) == 0
    assert "still pending" in str(raised.value)


def test_a_delivery_the_worker_drops_unrun_is_no_longer_pending(jobs_stack):
    # A message whose expiry passes while it waits for its ETA is received (in flight), then
    # revoked instead of run: no task_postrun fires for it, and drain() must not wait on it.
    feature = Feature("dropped")

    @feature.job("never-run", manual=True)
    def never_run(payload: dict[str, Any], ctx: Any) -> None:
        raise AssertionError("an expired delivery ran")

    stack = jobs_stack([feature])
    jobs = stack.app.celery_jobs
    outcomes = jobs.outcomes
    jobs.celery.send_task(
        "dropped:job:never-run",
        kwargs={"attempt": 1},
        queue=jobs.publisher.route("dropped:job:never-run"),
        countdown=1.5,
        expires=0.5,
    )
    received = time.monotonic() + 30
    while outcomes.in_flight == 0 and time.monotonic() < received:
        outcomes.changed.wait(0.05)
    assert outcomes.in_flight == 1, "the worker did not receive the delivery"
    summary = stack.drain()
    assert outcomes.in_flight == 0
    assert (summary.succeeded, summary.failed) == (0, 0)


def test_drain_times_out_naming_what_is_pending_then_settles(jobs_stack):
    feature = Feature("slow")
    started, release = threading.Event(), threading.Event()

    @feature.job("blocked", manual=True)
    def blocked(payload: dict[str, Any], ctx: Any) -> None:
        started.set()
        release.wait(60)

    stack = jobs_stack([feature])
    stack.dispatch_job("slow:job:blocked", {})
    # The attempt runs (and stays) before the drain starts: what it finds pending is known.
    assert started.wait(30), "the worker did not start the job"
    with pytest.raises(DrainTimeoutError, match="reserved by workers 1"):
        stack.drain(timeout=2)
    # The job row says the attempt runs; its run row is written when it ends.
    (row,) = job_rows(stack)
    assert (row.state, row.attempt, row.finished_at) == ("running", 1, None)
    assert job_runs(stack) == []
    release.set()
    assert stack.drain().succeeded == 1


def test_drain_on_an_idle_stack_returns_an_empty_summary(jobs_stack):
    feature = Feature("idle")

    @feature.job("never", manual=True)
    def never(payload: dict[str, Any], ctx: Any) -> None:
        return None

    stack = jobs_stack([feature])
    summary = stack.drain()
    assert (summary.succeeded, summary.failed, summary.retried) == (0, 0, 0)
