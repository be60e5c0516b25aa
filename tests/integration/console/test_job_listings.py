"""The job-admin queries the console reads: job rows by filter, counts by job, lane and state,
and throughput per minute; each answers the caller's tenant only."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import update

from asanoha.handlers import job_admin
from asanoha.platform.model import SessionUser
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
