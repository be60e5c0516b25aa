"""``JobContext.attempt`` / ``final_attempt`` and the run rows of each attempt."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from asanoha.platform.model import Backoff, Feature
from asanoha.workers import JobFailedError
from tests.integration.workers.conftest import job_rows, job_runs


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


class KeyServiceBlip:
    """Opens a job's sealed values as the platform does, after failing ``failures`` times
    (the key service did not answer): an error after the claim, before the job's code."""

    def __init__(self, reveal: Callable[[Any, Any], Any], failures: int) -> None:
        self.reveal = reveal
        self.failures = failures

    def __call__(self, engine: Any, value: Any) -> Any:
        if self.failures > 0:
            self.failures -= 1
            raise ConnectionError("the key service did not answer")
        return self.reveal(engine, value)


@pytest.mark.parametrize("database", ["postgres", "sqlite"])
def test_an_error_before_the_jobs_code_ends_the_attempt_and_the_retry_runs(
    asanoha_stack, monkeypatch, database
):
    seen: list[tuple[int, bool]] = []
    stack = asanoha_stack(features=[_feature(seen)], jobs=True, database=database)
    personal = stack.service.personal
    monkeypatch.setattr(personal, "reveal_detached", KeyServiceBlip(personal.reveal_detached, 1))
    stack.dispatch_job("attempts:job:flaky", {})
    summary = stack.drain()
    # Attempt 1 never reached the job's code; it counts, and the next attempt runs.
    assert seen == [(2, False), (3, True)]
    assert (summary.succeeded, summary.retried) == (1, 2)
    runs = sorted(job_runs(stack, "attempts:job:flaky"), key=lambda run: run.attempt)
    assert [(r.attempt, r.status, r.error) for r in runs] == [
        (1, "retrying", "ConnectionError: the key service did not answer"),
        (2, "retrying", "RuntimeError: attempt 2 failed"),
        (3, "succeeded", None),
    ]


@pytest.mark.parametrize("database", ["postgres", "sqlite"])
def test_an_error_before_the_jobs_code_on_its_final_attempt_fails_the_job(
    asanoha_stack, monkeypatch, database
):
    seen: list[tuple[int, bool]] = []
    stack = asanoha_stack(features=[_feature(seen)], jobs=True, database=database)
    personal = stack.service.personal
    monkeypatch.setattr(personal, "reveal_detached", KeyServiceBlip(personal.reveal_detached, 1))
    stack.dispatch_job("attempts:job:once", {})
    with pytest.raises(JobFailedError, match="the key service did not answer"):
        stack.drain()
    assert seen == []
    [row] = job_rows(stack, "attempts:job:once")
    assert (row.state, row.attempt) == ("failed", 1)
    [run] = job_runs(stack, "attempts:job:once")
    assert (run.attempt, run.status) == (1, "failed")
