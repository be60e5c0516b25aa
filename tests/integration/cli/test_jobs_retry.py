"""``asanoha jobs failed|retry|prune``: list the failed jobs, run one again with its full
attempt budget, delete old finished rows; refusals exit 1 with the reason."""

from __future__ import annotations

import datetime as dt
import sys
from typing import Any

import pytest
from sqlalchemy import select, update
from typer.testing import CliRunner, Result

from asanoha import App
from asanoha.cli import cli
from asanoha.platform.model import SessionUser
from asanoha.platform.service.job_operations import retry_failed_job
from asanoha.testing import TestUsers
from asanoha.workers import JobFailedError
from tests.integration.handlers.flaky import NOTE_CREATE, SEND, Switch, flaky_feature

#: The application the commands load (``--app`` below); each test sets it to its stack's.
APP: App | None = None
APP_OPTION = ["--app", f"{__name__}:APP"]


@pytest.fixture
def failed_job(asanoha_stack: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Switch]:
    """A stack with a worker whose ``flaky:job:send`` failed for good."""
    switch = Switch()
    stack = asanoha_stack(features=[flaky_feature(switch, retries=0)], jobs=True)
    monkeypatch.setattr(sys.modules[__name__], "APP", stack.app)
    stack.http.write_ok(NOTE_CREATE, {"text": "hi"}, TestUsers.admin)
    with pytest.raises(JobFailedError):
        stack.drain()
    return stack, switch


def jobs(*args: str) -> Result:
    return CliRunner().invoke(cli, ["jobs", *args, *APP_OPTION], env={"COLUMNS": "250"})


def job_row(stack: Any) -> Any:
    outbox = stack.tables.outbox
    with stack.db.connect() as conn:
        return conn.execute(select(outbox).where(outbox.c.job_qn == SEND)).one()


def test_retry_runs_a_failed_job_again_and_refuses_one_that_did_not_fail(failed_job):
    stack, switch = failed_job
    row = job_row(stack)
    listed = jobs("failed")
    assert listed.exit_code == 0, listed.output
    assert str(row.id) in listed.output and "ConnectionError" in listed.output

    switch.failing = False
    retried = jobs("retry", str(row.id))
    assert retried.exit_code == 0, retried.output
    assert f"{SEND} {row.id}: pending again after attempt 1 failed; published" in retried.output
    stack.drain()
    assert (job_row(stack).state, job_row(stack).attempt) == ("succeeded", 1)
    assert [attempt for attempt, *_ in switch.seen] == [1, 1]
    runs = jobs("runs")
    assert "requeued" in runs.output and "requeued by asanoha jobs retry" in runs.output

    again = jobs("retry", str(row.id))
    assert again.exit_code == 1
    assert "job_not_failed" in again.output and "is succeeded" in again.output


def test_retry_refuses_unknown_and_malformed_ids(failed_job):
    stack, _ = failed_job
    unknown = jobs("retry", "00000000-0000-0000-0000-000000000001")
    assert unknown.exit_code == 1
    assert "job_row_not_found" in unknown.output
    malformed = jobs("retry", "not-an-id")
    assert malformed.exit_code == 1
    assert "is not a job id" in malformed.output
    assert job_row(stack).state == "failed"


def test_a_retry_left_to_the_relay_runs_when_the_relay_sends_it(failed_job):
    # What `asanoha jobs retry` does on the in-process broker: no publish of its own.
    stack, switch = failed_job
    row = job_row(stack)
    switch.failing = False
    operator = SessionUser.system(TestUsers.admin.tenant_id)
    with stack.service.unit_of_work(operator) as request:
        retry_failed_job(
            request,
            stack.tables,
            row.id,
            registry=stack.registry,
            requested_by="test",
            publish=False,
        )
    pending = job_row(stack)
    assert (pending.state, pending.attempt, pending.published_at, pending.claim_token) == (
        "pending",
        0,
        None,
        None,
    )
    assert pending.relay_after <= dt.datetime.now(dt.UTC)
    stack.drain()  # relays due rows, as every worker's relay does
    assert job_row(stack).state == "succeeded"


def test_prune_deletes_finished_rows_older_than_the_given_days(failed_job):
    stack, _ = failed_job
    kept = jobs("prune", "--older-than-days", "1")
    assert kept.exit_code == 0, kept.output
    assert "pruned 0 finished job row(s) older than 1 day(s)" in kept.output
    outbox, runs = stack.tables.outbox, stack.tables.job_runs
    long_ago = dt.datetime.now(dt.UTC) - dt.timedelta(days=3)
    with stack.db.begin() as conn:
        conn.execute(update(outbox).values(finished_at=long_ago))
        conn.execute(update(runs).values(finished_at=long_ago))
    pruned = jobs("prune", "--older-than-days", "2")
    assert "pruned 1 finished job row(s) older than 2 day(s)" in pruned.output
    with stack.db.connect() as conn:
        assert conn.execute(select(outbox)).all() == []
        assert conn.execute(select(runs)).all() == []
