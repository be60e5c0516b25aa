"""Whatever fails between the claim and the job's code (opening the sealed payload, building
the job's context, reading the row's headers) ends the attempt before the message is
acknowledged: a retry or the job's failure, never a row left running."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import update

from asanoha.platform.model import Backoff, Feature
from asanoha.workers import JobFailedError, attempts
from tests.integration.workers.conftest import job_rows, job_runs
from tests.integration.workers.test_attempts import KeyServiceBlip


def _feature(seen: list[int]) -> Feature:
    feature = Feature("early")

    @feature.job("retried", manual=True, retries=1, backoff=Backoff.fixed(0.01))
    def retried(payload: dict[str, Any], ctx: Any) -> None:
        seen.append(ctx.attempt)

    @feature.job("once", manual=True)
    def once(payload: dict[str, Any], ctx: Any) -> None:
        seen.append(ctx.attempt)

    return feature


class ContextFails:
    """Builds the job's context as the platform does, after failing ``failures`` times."""

    def __init__(self, failures: int) -> None:
        self.build = attempts.JobContext
        self.failures = failures

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.failures > 0:
            self.failures -= 1
            raise RuntimeError("the context could not be built")
        return self.build(*args, **kwargs)


@pytest.mark.parametrize("database", ["postgres", "sqlite"])
def test_a_payload_that_cannot_be_opened_on_the_final_attempt_fails_the_job(
    asanoha_stack, monkeypatch, database
):
    seen: list[int] = []
    stack = asanoha_stack(features=[_feature(seen)], jobs=True, database=database)
    personal = stack.service.personal
    monkeypatch.setattr(personal, "reveal_detached", KeyServiceBlip(personal.reveal_detached, 9))
    stack.dispatch_job("early:job:once", {})
    with pytest.raises(JobFailedError, match="the key service did not answer"):
        stack.drain()
    assert seen == []
    [row] = job_rows(stack, "early:job:once")
    assert (row.state, row.attempt) == ("failed", 1)
    assert [(run.attempt, run.status) for run in job_runs(stack)] == [(1, "failed")]


@pytest.mark.parametrize("database", ["postgres", "sqlite"])
def test_a_context_that_cannot_be_built_ends_the_attempt_and_the_retry_runs(
    asanoha_stack, monkeypatch, database
):
    seen: list[int] = []
    stack = asanoha_stack(features=[_feature(seen)], jobs=True, database=database)
    monkeypatch.setattr(attempts, "JobContext", ContextFails(1))
    stack.dispatch_job("early:job:retried", {})
    summary = stack.drain()
    assert seen == [2]
    assert (summary.succeeded, summary.retried) == (1, 1)
    runs = [(run.attempt, run.status, run.error) for run in job_runs(stack)]
    assert runs == [
        (1, "retrying", "RuntimeError: the context could not be built"),
        (2, "succeeded", None),
    ]


@pytest.mark.parametrize("database", ["postgres", "sqlite"])
def test_a_row_whose_headers_cannot_be_read_fails_at_once(asanoha_stack, database):
    seen: list[int] = []
    stack = asanoha_stack(features=[_feature(seen)], jobs=True, database=database)
    qn = "early:job:retried"
    stack.app.jobs.pause(qn)
    row_id = stack.app.jobs.run(qn, {})
    # Its message reaches the worker while the job is paused, and the row waits unpublished:
    # a resume before that would race the worker's park, and the relay's copy of the
    # message could find the attempt running (a look again at its time limit, minutes off).
    assert stack.drain().paused == {qn: 1}
    outbox = stack.tables.outbox
    with stack.db.begin() as conn:
        # Written by hand, or by a release that stored them differently: not an object.
        conn.execute(update(outbox).where(outbox.c.id == row_id).values(headers=["default"]))
    stack.app.jobs.resume(qn)
    with pytest.raises(JobFailedError):
        stack.drain()
    assert seen == []
    [row] = job_rows(stack, qn)
    # Headers do not change between attempts: no retry could read them either.
    assert (row.state, row.attempt) == ("failed", 1)
    [run] = job_runs(stack)
    assert (run.attempt, run.status) == (1, "failed")
    assert "AttributeError" in run.error
