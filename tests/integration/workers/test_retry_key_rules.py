"""An operator's retry is an enqueue of its job's key like any other: ``skip`` and
``unique_for`` answer with the key's live row instead of running the key twice, and
``replace`` cancels the key's other rows first."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from asanoha import Concurrency
from asanoha.platform.errors import ConflictError
from asanoha.platform.model import Feature
from asanoha.workers.drain import JobFailedError
from tests.integration.workers.conftest import job_rows, job_runs


def _failing_feature(name: str, **options: Any) -> tuple[Feature, dict[str, bool]]:
    feature = Feature(name)
    switch = {"fail": True}

    @feature.job("sync", manual=True, **options)
    def sync(payload: dict[str, Any], ctx: Any) -> None:
        if switch["fail"]:
            raise RuntimeError("down")

    return feature, switch


def _failed_row(stack: Any, qn: str, payload: dict[str, Any]) -> Any:
    row_id = stack.app.jobs.run(qn, payload)
    with pytest.raises(JobFailedError):
        stack.drain()
    (row,) = [row for row in job_rows(stack, qn) if row.id == row_id]
    assert row.state == "failed"
    return row_id


def _snapshot(stack: Any) -> tuple[list[Any], list[Any]]:
    outbox = stack.tables.outbox
    with stack.db.connect() as conn:
        rows = conn.execute(select(outbox).order_by(outbox.c.id)).all()
    return [tuple(row) for row in rows], [tuple(run) for run in job_runs(stack)]


@pytest.mark.parametrize(
    "options",
    [
        pytest.param({"concurrency": Concurrency.skip(key=["account"])}, id="skip"),
        pytest.param({"unique_for": 3600}, id="unique_for"),
    ],
)
def test_a_retry_is_refused_while_the_key_has_a_row_that_answers_it(jobs_stack, options):
    feature, switch = _failing_feature("retrykeys", **options)
    stack = jobs_stack([feature])
    qn = "retrykeys:job:sync"
    failed = _failed_row(stack, qn, {"account": "a"})
    # A later enqueue of the key: pending (held back a while) for skip, succeeded for
    # unique_for (a failed row does not answer within its window).
    switch["fail"] = False
    if "unique_for" in options:
        live = stack.app.jobs.run(qn, {"account": "a"})
        stack.drain()
    else:
        live = stack.app.jobs.run(qn, {"account": "a"}, delay=3600)
    assert live != failed
    before = _snapshot(stack)
    with pytest.raises(ConflictError) as refused:
        stack.app.jobs.retry(failed, requested_by="operator")
    error = refused.value
    assert (error.http_status, error.code, error.reason) == (409, "conflict", "job_key_taken")
    assert error.details["existing"] == str(live)
    assert _snapshot(stack) == before
    if "unique_for" not in options:
        # Once the key's row is gone, the retry runs.
        stack.app.jobs.cancel(live)
        assert stack.app.jobs.retry(failed, requested_by="operator").id == failed
        stack.drain()
        states = {row.id: row.state for row in job_rows(stack, qn)}
        assert (states[failed], states[live]) == ("succeeded", "cancelled")


def test_a_retry_of_a_replace_key_cancels_the_keys_pending_rows(jobs_stack):
    feature, switch = _failing_feature("retryreplace", concurrency=Concurrency.replace())
    stack = jobs_stack([feature])
    qn = "retryreplace:job:sync"
    failed = _failed_row(stack, qn, {})
    switch["fail"] = False
    pending = stack.app.jobs.run(qn, {}, delay=3600)
    stack.app.jobs.retry(failed, requested_by="operator")
    stack.drain()
    states = {row.id: row.state for row in job_rows(stack, qn)}
    assert (states[failed], states[pending]) == ("succeeded", "cancelled")
