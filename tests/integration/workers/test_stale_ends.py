"""The end of an attempt holds only the claim it ends: after an operator's retry the attempt
numbers start again, and a late end of the earlier run must not end the new attempt."""

from __future__ import annotations

from typing import Any

import pytest

from asanoha.platform.jobs.attempts import AttemptEnd, Claim, job_rows_for, new_claim_token
from asanoha.platform.model import Feature, SessionUser
from asanoha.platform.service.job_operations import retry_failed_job
from tests.integration.workers.conftest import job_rows, job_runs

JOB = "stale:job:once"


def _feature() -> Feature:
    feature = Feature("stale")

    @feature.job("once", manual=True)
    def once(payload: dict[str, Any], ctx: Any) -> None:
        pass

    return feature


@pytest.mark.parametrize("database", ["postgres", "sqlite"])
def test_a_late_end_from_before_an_operators_retry_leaves_the_new_attempt_alone(
    asanoha_stack, database
):
    stack = asanoha_stack(features=[_feature()], database=database)
    rows = job_rows_for(stack.db, stack.tables)
    row_id = stack.service.enqueue_job(JOB, {}, SessionUser.system("default"))
    lost = rows.claim(row_id, 1)
    assert isinstance(lost, Claim)
    # Its worker stops answering; a redelivery finds attempt 1 running and ends it as
    # crashed (no retry left: the job fails for good).
    running = rows.claim(row_id, 1)
    assert not isinstance(running, Claim)
    assert running.token == lost.token
    judged = Claim(JOB, {}, {}, None, lost.started_at, new_claim_token(), lost_token=running.token)
    assert rows.end(row_id, JOB, "default", 1, judged, AttemptEnd("crashed", "failed", "lost"))
    # An operator runs it again: attempt 1 once more, under a new claim.
    with stack.service.unit_of_work(SessionUser.system("default")) as request:
        retry_failed_job(
            request,
            stack.tables,
            row_id,
            registry=stack.registry,
            requested_by="test",
            publish=False,
        )
    current = rows.claim(row_id, 1)
    assert isinstance(current, Claim)
    before = job_rows(stack)[0]

    # The first worker comes back and ends its attempt 1.
    late = AttemptEnd("succeeded", "succeeded")
    assert not rows.end(row_id, JOB, "default", 1, lost, late)
    after = job_rows(stack)[0]
    assert after == before
    assert (after.state, after.attempt, after.claim_token) == ("running", 1, current.token)

    # The current attempt's own end holds.
    failed = AttemptEnd("failed", "failed", "RuntimeError: the current attempt failed")
    assert rows.end(row_id, JOB, "default", 1, current, failed)
    ended = job_rows(stack)[0]
    assert (ended.state, ended.last_error) == ("failed", failed.error)
    # Every attempt that ran is in the history, the late one included.
    assert [(r.attempt, r.status) for r in job_runs(stack)] == [
        (1, "crashed"),
        (1, "requeued"),
        (1, "succeeded"),
        (1, "failed"),
    ]
    rows.close()
