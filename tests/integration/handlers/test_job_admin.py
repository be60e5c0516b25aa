"""The bundled job-admin handlers: a system administrator retries a job that failed for good
over HTTP, and lists the newest attempts and failures; everyone else is refused."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from sqlalchemy import select, update

from asanoha.handlers import job_admin
from asanoha.platform.errors import UnprocessableError
from asanoha.platform.model import Feature, SessionUser
from asanoha.testing import TestUsers
from asanoha.workers import JobFailedError
from tests.integration.handlers.flaky import NOTE_CREATE, SEND, Switch, flaky_feature

RETRY = "job-admin:write:retry"
OPERATOR = SessionUser.of("ops-1", TestUsers.admin.tenant_id, ["SystemAdmin"])


def job_row(stack: Any) -> Any:
    outbox = stack.tables.outbox
    with stack.db.connect() as conn:
        return conn.execute(select(outbox).where(outbox.c.job_qn == SEND)).one()


def run_rows(stack: Any) -> list[tuple[int, str]]:
    runs = stack.tables.job_runs
    with stack.db.connect() as conn:
        rows = conn.execute(select(runs.c.attempt, runs.c.status).order_by(runs.c.id)).all()
    return [(row.attempt, row.status) for row in rows]


@pytest.mark.parametrize("database", ["postgres", "sqlite"])
def test_a_system_admin_retries_a_failed_job_over_http_and_it_runs(asanoha_stack, database):
    switch = Switch()
    stack = asanoha_stack(
        features=[flaky_feature(switch), job_admin.feature], jobs=True, database=database
    )
    stack.http.write_ok(NOTE_CREATE, {"text": "hi"}, TestUsers.admin)
    with pytest.raises(JobFailedError, match="mail server did not answer"):
        stack.drain()
    failed = job_row(stack)
    assert (failed.state, failed.attempt) == ("failed", 2)
    [listed] = stack.http.query_ok("job-admin:query:failed", {}, OPERATOR)
    assert (listed["id"], listed["job"], listed["attempt"]) == (str(failed.id), SEND, 2)

    switch.failing = False
    retried = stack.http.write_ok(RETRY, {"id": str(failed.id)}, OPERATOR)
    assert retried == {"id": str(failed.id), "job": SEND, "state": "pending", "failed_attempt": 2}
    stack.drain()

    done = job_row(stack)
    assert (done.state, done.attempt, done.last_error) == ("succeeded", 1, None)
    # The same payload and headers: tenant, who triggered it and the write origin are kept.
    assert (done.payload, done.headers) == (failed.payload, failed.headers)
    first = (TestUsers.admin.tenant_id, TestUsers.admin.id, NOTE_CREATE)
    # The attempt count started again: the retried job had its full budget.
    assert switch.seen == [(1, *first), (2, *first), (1, *first)]
    assert run_rows(stack) == [(1, "retrying"), (2, "failed"), (2, "requeued"), (1, "succeeded")]
    runs = stack.http.query_ok("job-admin:query:runs", {"limit": 2}, OPERATOR)
    assert [(run["status"], run["attempt"]) for run in runs] == [("succeeded", 1), ("requeued", 2)]
    assert runs[1]["error"] == "requeued by ops-1"
    assert stack.http.query_ok("job-admin:query:failed", {}, OPERATOR) == []
    events = stack.tables.events
    with stack.db.connect() as conn:
        [event] = conn.execute(select(events).where(events.c.type.like("job-admin:%"))).all()
    assert (event.type, event.stream_id, event.created_by) == (
        "job-admin:event:job-retried",
        str(failed.id),
        "ops-1",
    )
    assert event.payload["failed_attempt"] == 2
    assert "mail server" in event.payload["last_error"]


def failed_job_stack(asanoha_stack: Any) -> Any:
    """A stack without a worker whose job row failed for good."""
    stack = asanoha_stack(features=[flaky_feature(Switch()), job_admin.feature])
    stack.http.write_ok(NOTE_CREATE, {"text": "hi"}, TestUsers.admin)
    outbox = stack.tables.outbox
    with stack.db.begin() as conn:
        conn.execute(update(outbox).values(state="failed", attempt=2, last_error="Boom: no"))
    return stack


def test_a_retry_by_another_role_is_refused_and_writes_nothing(asanoha_stack):
    stack = failed_job_stack(asanoha_stack)
    row = job_row(stack)
    # No token holds the system role (401 token_invalid, tests/unit/http/test_token_rules.py).
    for caller in (TestUsers.admin, TestUsers.user):
        with stack.nothing_written():
            error = stack.http.write_err(RETRY, {"id": str(row.id)}, caller)
        assert (error.http_status, error.code, error.reason) == (
            403,
            "access_denied",
            "role_required",
        )
        assert error.details["handler"] == RETRY
    assert job_row(stack) == row


def test_retrying_an_unknown_job_answers_not_found(asanoha_stack):
    stack = failed_job_stack(asanoha_stack)
    unknown = str(uuid.uuid4())
    with stack.nothing_written():
        error = stack.http.write_err(RETRY, {"id": unknown}, OPERATOR)
    assert (error.http_status, error.reason, error.details) == (
        404,
        "job_row_not_found",
        {"id": unknown},
    )
    # Another tenant's job is unknown to this tenant's administrators.
    elsewhere = SessionUser.of("ops-2", TestUsers.other_tenant.tenant_id, ["SystemAdmin"])
    row = job_row(stack)
    with stack.nothing_written():
        error = stack.http.write_err(RETRY, {"id": str(row.id)}, elsewhere)
    assert (error.http_status, error.reason) == (404, "job_row_not_found")
    assert stack.http.query_ok("job-admin:query:failed", {}, elsewhere) == []


@pytest.mark.parametrize("state", ["pending", "running", "succeeded"])
def test_retrying_a_job_that_did_not_fail_answers_conflict(asanoha_stack, state):
    stack = failed_job_stack(asanoha_stack)
    outbox = stack.tables.outbox
    with stack.db.begin() as conn:
        conn.execute(update(outbox).values(state=state))
    row = job_row(stack)
    with stack.nothing_written():
        error = stack.http.write_err(RETRY, {"id": str(row.id)}, OPERATOR)
    assert (error.http_status, error.code, error.reason) == (409, "conflict", "job_not_failed")
    assert error.details == {"id": str(row.id), "job": SEND, "state": state}
    assert f"is {state}; only a job that failed for good can be retried" in error.message


def test_a_system_admin_cancels_a_pending_job_and_a_finished_one_answers_conflict(asanoha_stack):
    stack = asanoha_stack(features=[flaky_feature(Switch()), job_admin.feature])
    stack.http.write_ok(NOTE_CREATE, {"text": "hi"}, TestUsers.admin)
    row = job_row(stack)
    cancelled = stack.http.write_ok("job-admin:write:cancel", {"id": str(row.id)}, OPERATOR)
    assert cancelled == {"id": str(row.id), "job": SEND, "state": "cancelled"}
    assert job_row(stack).state == "cancelled"
    events = stack.tables.events
    with stack.db.connect() as conn:
        [event] = conn.execute(select(events).where(events.c.type.like("job-admin:%"))).all()
    assert (event.type, event.stream_id) == ("job-admin:event:job-cancelled", str(row.id))
    with stack.nothing_written():
        error = stack.http.write_err("job-admin:write:cancel", {"id": str(row.id)}, OPERATOR)
    assert (error.http_status, error.code, error.reason) == (409, "conflict", "job_not_cancellable")
    assert error.details == {"id": str(row.id), "job": SEND, "state": "cancelled"}
    # Another tenant's administrators do not find it.
    elsewhere = SessionUser.of("ops-2", TestUsers.other_tenant.tenant_id, ["SystemAdmin"])
    with stack.nothing_written():
        error = stack.http.write_err("job-admin:write:cancel", {"id": str(row.id)}, elsewhere)
    assert (error.http_status, error.reason) == (404, "job_row_not_found")


def triggered_feature() -> Feature:
    """A job of each trigger: only ``report`` is declared to run by hand."""
    feature = Feature("triggered")
    feature.job("on-note", on=NOTE_CREATE)(lambda payload, ctx: None)
    feature.job("nightly", cron="0 3 * * *")(lambda payload, ctx: None)
    feature.job("warm", run_on_boot=True)(lambda payload, ctx: None)
    feature.job("report", manual=True)(lambda payload, ctx: None)
    return feature


NOT_MANUAL = {
    "triggered:job:on-note": f"on {NOTE_CREATE}",
    "triggered:job:nightly": "cron 0 3 * * *",
    "triggered:job:warm": "run_on_boot",
}


@pytest.mark.parametrize("database", ["postgres", "sqlite"])
def test_running_a_job_not_declared_manual_by_hand_is_refused_and_writes_nothing(
    asanoha_stack, database
):
    stack = asanoha_stack(
        features=[flaky_feature(Switch()), triggered_feature(), job_admin.feature],
        database=database,
    )
    for job, trigger in NOT_MANUAL.items():
        with stack.nothing_written():
            error = stack.http.write_err(
                "job-admin:write:run", {"job": job, "payload": {"text": "mine"}}, OPERATOR
            )
        assert (error.http_status, error.code, error.reason) == (
            422,
            "unprocessable",
            "job_not_manual",
        )
        assert error.details == {"job": job, "trigger": trigger}
        assert "manual=True" in error.message
        # The same refusal for every entry: app.jobs.run (the CLI and the console's too).
        with stack.nothing_written(), pytest.raises(UnprocessableError) as refused:
            stack.app.jobs.run(job, {"text": "mine"})
        assert refused.value.reason == "job_not_manual"
    ran = stack.http.write_ok("job-admin:write:run", {"job": "triggered:job:report"}, OPERATOR)
    assert (ran["job"], ran["state"]) == ("triggered:job:report", "pending")
