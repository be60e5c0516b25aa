"""``JobContext.attempt`` / ``final_attempt`` and the run rows of each attempt."""

from __future__ import annotations

from typing import Any

from asanoha.platform.model import Backoff, Feature
from tests.integration.workers.conftest import job_runs


def _feature(seen: list[tuple[int, bool]]) -> Feature:
    feature = Feature("attempts")

    @feature.job("flaky", manual=True, retries=2, backoff=Backoff.fixed(0.01))
    def flaky(payload: dict[str, Any], ctx: Any) -> None:
        seen.append((ctx.attempt, ctx.final_attempt))
        if ctx.attempt < 3:
            raise RuntimeError(f"attempt {ctx.attempt} failed")

    @feature.job("once", manual=True)
    def once(payload: dict[str, Any], ctx: Any) -> None:
        seen.append((ctx.attempt, ctx.final_attempt))

    return feature


def test_a_job_with_two_retries_failing_twice_sees_attempts_one_to_three(jobs_stack):
    seen: list[tuple[int, bool]] = []
    stack = jobs_stack([_feature(seen)])
    task_id = stack.dispatch_job("attempts:job:flaky", {})
    summary = stack.drain()
    assert seen == [(1, False), (2, False), (3, True)]
    assert (summary.succeeded, summary.retried, summary.failed) == (1, 2, 0)
    runs = sorted(job_runs(stack, "attempts:job:flaky"), key=lambda run: run.attempt)
    assert [(r.attempt, r.status) for r in runs] == [
        (1, "retrying"),
        (2, "retrying"),
        (3, "succeeded"),
    ]
    assert {r.task_id for r in runs} == {task_id}
    assert runs[0].error == "RuntimeError: attempt 1 failed"
    assert runs[2].error is None
    assert all(r.finished_at >= r.started_at for r in runs)


def test_a_job_without_retries_is_final_on_its_first_attempt(jobs_stack):
    seen: list[tuple[int, bool]] = []
    stack = jobs_stack([_feature(seen)])
    stack.dispatch_job("attempts:job:once", {})
    stack.drain()
    assert seen == [(1, True)]
    (run,) = job_runs(stack, "attempts:job:once")
    assert (run.attempt, run.status, run.tenant_id) == (1, "succeeded", "default")
