"""The job-admin queries the console reads: job rows by filter, counts by job, lane and state,
and throughput per minute; each answers the caller's tenant only."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from sqlalchemy import insert, update

from asanoha.handlers import job_admin
from asanoha.platform.model import SessionUser
from asanoha.platform.service.job_listings import job_throughput
from asanoha.testing import TestUsers
from asanoha.workers import JobFailedError
from tests.integration.handlers.flaky import NOTE_CREATE, SEND, Switch, flaky_feature

OPERATOR = SessionUser.of("ops-1", TestUsers.admin.tenant_id, ["SystemAdmin"])
STRANGER = SessionUser.of("ops-2", "another-tenant", ["SystemAdmin"])


@pytest.mark.parametrize("database", ["postgres", "sqlite"])
def test_jobs_and_summary_show_the_callers_tenant_by_state_lane_and_minute(
    asanoha_stack: Any, database: str
) -> None:
    stack = asanoha_stack(
        features=[flaky_feature(Switch()), job_admin.feature], jobs=True, database=database
    )
    stack.http.write_ok(NOTE_CREATE, {"text": "hi"}, TestUsers.admin)
    with pytest.raises(JobFailedError):
        stack.drain()

    [row] = stack.http.query_ok("job-admin:query:jobs", {}, OPERATOR)
    assert (row["job"], row["state"], row["attempt"], row["tenant"]) == (
        SEND,
        "failed",
        2,
        TestUsers.admin.tenant_id,
    )
    assert "mail server did not answer" in row["last_error"]
    assert stack.http.query_ok("job-admin:query:jobs", {"state": "pending"}, OPERATOR) == []
    assert stack.http.query_ok("job-admin:query:jobs", {"job": SEND}, OPERATOR) == [row]
    assert stack.http.query_ok("job-admin:query:jobs", {"id": row["id"]}, OPERATOR) == [row]

    summary = stack.http.query_ok("job-admin:query:summary", {}, OPERATOR)
    assert summary["counts"] == [{"job": SEND, "lane": "worker", "state": "failed", "count": 1}]
    assert len(summary["throughput"]) == 60
    # Two attempts ended by an error (a retry, then the final failure), none succeeded.
    assert sum(slot["failed"] for slot in summary["throughput"]) == 2
    assert sum(slot["succeeded"] for slot in summary["throughput"]) == 0

    assert stack.http.query_ok("job-admin:query:jobs", {}, STRANGER) == []
    other = stack.http.query_ok("job-admin:query:summary", {"minutes": 5}, STRANGER)
    assert other["counts"] == []
    assert [slot["failed"] for slot in other["throughput"]] == [0] * 5


def test_job_listings_are_for_system_admins_only(asanoha_stack: Any) -> None:
    stack = asanoha_stack(features=[flaky_feature(Switch()), job_admin.feature])
    stack.http.write_ok(NOTE_CREATE, {"text": "hi"}, TestUsers.admin)
    with stack.db.begin() as conn:
        conn.execute(update(stack.tables.outbox).values(state="failed"))
    for qn in ("job-admin:query:jobs", "job-admin:query:summary"):
        error = stack.http.query_err(qn, {}, TestUsers.admin)
        assert (error.http_status, error.reason) == (403, "role_required")


@pytest.mark.parametrize("database", ["postgres", "sqlite"])
def test_throughput_counts_each_minute_of_the_window_in_the_database(
    asanoha_stack: Any, database: str
) -> None:
    stack = asanoha_stack(features=[job_admin.feature], database=database)
    now = dt.datetime(2026, 1, 2, 10, 30, 20, tzinfo=dt.UTC)
    ended = [
        (now - dt.timedelta(minutes=2, seconds=5), "succeeded"),  # 10:28
        (now - dt.timedelta(minutes=2, seconds=15), "failed"),  # 10:28
        (now - dt.timedelta(seconds=10), "retrying"),  # 10:30
        (now - dt.timedelta(seconds=15), "succeeded"),  # 10:30
        (now - dt.timedelta(seconds=18), "requeued"),  # not an attempt's end
        (now - dt.timedelta(minutes=5), "succeeded"),  # before the window
    ]
    with stack.db.begin() as conn:
        for finished, status in ended:
            conn.execute(
                insert(stack.tables.job_runs).values(
                    job_qn="x:job:y", task_id="t", tenant_id="a", attempt=1, status=status,
                    started_at=finished, finished_at=finished,
                )
            )  # fmt: skip
        conn.execute(
            insert(stack.tables.job_runs).values(
                job_qn="x:job:y", task_id="t", tenant_id="b", attempt=1, status="failed",
                started_at=now, finished_at=now,
            )
        )  # fmt: skip
    with stack.db.connect() as conn:
        slots = job_throughput(conn, stack.tables, minutes=3, tenant_id="a", now=now)
    assert [(slot.minute.strftime("%H:%M"), slot.succeeded, slot.failed) for slot in slots] == [
        ("10:28", 1, 1),
        ("10:29", 0, 0),
        ("10:30", 1, 1),
    ]
