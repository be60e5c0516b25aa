"""The gap between attempts is never shorter than the declared backoff (lower bounds only)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from asanoha.platform.model import Backoff, Feature
from asanoha.workers import JobFailedError
from tests.integration.workers.conftest import job_runs


def _always_failing(backoff: Backoff | None, retries: int) -> Feature:
    feature = Feature("backoff")

    @feature.job("fail", manual=True, retries=retries, backoff=backoff)
    def fail(payload: dict[str, Any], ctx: Any) -> None:
        raise RuntimeError("still broken")

    return feature


def _gaps(stack: Any) -> list[float]:
    runs = sorted(job_runs(stack, "backoff:job:fail"), key=lambda run: run.attempt)
    return [
        (later.started_at - earlier.finished_at).total_seconds()
        for earlier, later in itertools.pairwise(runs)
    ]


def test_the_default_exponential_backoff_waits_at_least_one_second(jobs_stack):
    stack = jobs_stack([_always_failing(None, retries=1)])
    stack.dispatch_job("backoff:job:fail", {})
    with pytest.raises(JobFailedError):
        stack.drain()
    (gap,) = _gaps(stack)
    assert gap >= 1.0


def test_exponential_backoff_doubles_from_its_base(jobs_stack):
    stack = jobs_stack([_always_failing(Backoff.exponential(base=0.05), retries=3)])
    stack.dispatch_job("backoff:job:fail", {})
    with pytest.raises(JobFailedError):
        stack.drain()
    gaps = _gaps(stack)
    assert len(gaps) == 3
    for gap, declared in zip(gaps, [0.05, 0.1, 0.2], strict=True):
        assert gap >= declared


def test_fixed_backoff_waits_at_least_its_delay(jobs_stack):
    stack = jobs_stack([_always_failing(Backoff.fixed(0.3), retries=1)])
    stack.dispatch_job("backoff:job:fail", {})
    with pytest.raises(JobFailedError):
        stack.drain()
    (gap,) = _gaps(stack)
    assert gap >= 0.3
