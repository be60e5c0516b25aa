"""A job with ``rate_limit=`` waits for room in its window (its attempt not spent); it never
fails for it."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from asanoha.platform.errors import DefinitionError
from asanoha.platform.model import Feature, RateLimit, SessionUser
from tests.integration.workers.conftest import job_runs


def test_attempts_over_the_limit_wait_and_then_run(asanoha_stack):
    feature = Feature("paced")
    starts: list[tuple[str, float, int]] = []
    lock = threading.Lock()

    @feature.job("call", manual=True, rate_limit=RateLimit("2/second", per="tenant"))
    def call(payload: dict[str, Any], ctx: Any) -> None:
        with lock:
            starts.append((ctx.tenant_id, time.monotonic(), ctx.attempt))

    stack = asanoha_stack(features=[feature], jobs=True)
    for n in range(6):
        stack.app.jobs.run("paced:job:call", {"n": n})
    stack.app.jobs.run("paced:job:call", {"n": 0}, user=SessionUser.system("other"))
    summary = stack.drain(timeout=60)
    assert summary.failed == 0
    assert len(starts) == 7
    assert {attempt for *_, attempt in starts} == {1}
    ours = sorted(moment for tenant, moment, _ in starts if tenant == "default")
    # Never three starts of one tenant within the one-second window (a small margin for
    # the clocks of Redis and this process).
    assert all(ours[i + 2] - ours[i] >= 0.9 for i in range(len(ours) - 2))
    statuses = [run.status for run in job_runs(stack, "paced:job:call")]
    assert statuses.count("succeeded") == 7
    assert "rate_limited" in statuses and "failed" not in statuses


def test_a_job_rate_limit_must_be_a_rate_limit():
    feature = Feature("badpace")
    with pytest.raises(DefinitionError, match="badpace:job:x: rate_limit= takes RateLimit"):
        feature.job("x", manual=True, rate_limit="2/second")  # type: ignore[arg-type]


def test_an_attempt_waits_while_redis_does_not_answer_and_runs_once_it_is_back(
    asanoha_stack, private_redis
):
    feature = Feature("pacedown")
    ran: list[int] = []

    @feature.job("call", manual=True, rate_limit=RateLimit("100/second", per="tenant"))
    def call(payload: dict[str, Any], ctx: Any) -> None:
        ran.append(ctx.attempt)

    # The broker is the suite's Redis; the limits are counted in a Redis of the test's own.
    stack = asanoha_stack(
        features=[feature], jobs=True, settings={"rate_limit_url": private_redis.url}
    )
    private_redis.stop()
    stack.app.jobs.run("pacedown:job:call", {})
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and "rate_limited" not in statuses(stack):
        time.sleep(0.1)
    # Held, not failed: the rate limit fails closed for a job by waiting.
    assert ran == []
    assert "rate_limited" in statuses(stack) and "failed" not in statuses(stack)
    private_redis.start()
    summary = stack.drain(timeout=60)
    assert summary.failed == 0
    assert ran == [1]


def statuses(stack: Any) -> list[str]:
    return [run.status for run in job_runs(stack, "pacedown:job:call")]
