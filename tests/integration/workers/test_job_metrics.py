"""Job attempts are counted by job and outcome, with their duration."""

from __future__ import annotations

from typing import Any

from prometheus_client import REGISTRY

from asanoha.platform.model import Access, Backoff, Entity, Feature, SessionUser, fields
from asanoha.workers.job_metrics import count_job_attempts

ADMIN = SessionUser.of("admin-1", "default", ["Admin"])
JOB = "metered:job:flaky"

thing = Entity(table="metered_things", fields={"name": fields.text(personal=False, reason="x")})


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_attempts_are_counted_by_outcome_with_their_duration(jobs_stack: Any) -> None:
    feature = Feature("metered")
    feature.crud("thing", thing, write=Access(roles=["Admin"]), read=Access(roles=["Admin"]))

    @feature.job("flaky", on="metered:write:thing:create", retries=1, backoff=Backoff.fixed(0.01))
    def flaky(payload: dict[str, Any], ctx: Any) -> None:
        if ctx.attempt == 1:
            raise RuntimeError("once")

    count_job_attempts({JOB})
    before = {
        outcome: sample("asanoha_job_attempts_total", job=JOB, outcome=outcome)
        for outcome in ("retried", "succeeded")
    }
    seconds_before = sample("asanoha_job_attempt_seconds_count", job=JOB, outcome="succeeded")
    stack = jobs_stack([feature])
    stack.service.dispatch_write("metered:write:thing:create", {"name": "a"}, ADMIN)
    stack.drain()

    for outcome in ("retried", "succeeded"):
        assert sample("asanoha_job_attempts_total", job=JOB, outcome=outcome) == (
            before[outcome] + 1
        )
    assert sample("asanoha_job_attempt_seconds_count", job=JOB, outcome="succeeded") == (
        seconds_before + 1
    )
