"""The operator tenant operates every tenant's jobs: a cron job (it runs as the default tenant)
that failed is listed, and retried, by a system administrator of the operator tenant, and
stays invisible to another tenant's."""

from __future__ import annotations

from typing import Any

import pytest

from asanoha.handlers import job_admin
from asanoha.platform.model import Feature, SessionUser
from asanoha.workers import JobFailedError
from asanoha.workers.beat import CRON_TASK_NAME
from asanoha.workers.lanes import queue_name

NIGHTLY = "clock:job:nightly"
OPERATOR = SessionUser.of("ops-1", "ops", ["SystemAdmin"])
OTHER_TENANT_ADMIN = SessionUser.of("acme-1", "acme", ["SystemAdmin"])


class MailServerDown(Exception):
    """The nightly job's failure."""


def clock() -> Feature:
    feature = Feature("clock")

    @feature.job("nightly", cron="30 2 * * *")
    def nightly(payload: dict[str, Any], ctx: Any) -> None:
        raise MailServerDown("the mail server did not answer")

    return feature


def test_the_operator_tenant_sees_and_retries_a_failed_cron_job_another_tenant_does_not(
    asanoha_stack: Any,
) -> None:
    stack = asanoha_stack(
        features=[clock(), job_admin.feature], jobs=True, settings={"operator_tenant": "ops"}
    )
    queue = queue_name(stack.app.settings.queue_prefix, "worker")
    stack.app.celery.send_task(CRON_TASK_NAME, args=[NIGHTLY], queue=queue)
    with pytest.raises(JobFailedError, match="mail server did not answer"):
        stack.drain()

    [failed] = stack.http.query_ok("job-admin:query:failed", {}, OPERATOR)
    assert failed["job"] == NIGHTLY
    [row] = stack.http.query_ok("job-admin:query:jobs", {"job": NIGHTLY}, OPERATOR)
    assert (row["tenant"], row["state"]) == ("default", "failed")
    assert [run["job"] for run in stack.http.query_ok("job-admin:query:runs", {}, OPERATOR)] == [
        NIGHTLY
    ]

    # Another tenant's administrator sees nothing of it and cannot retry it.
    assert stack.http.query_ok("job-admin:query:failed", {}, OTHER_TENANT_ADMIN) == []
    assert stack.http.query_ok("job-admin:query:jobs", {}, OTHER_TENANT_ADMIN) == []
    with stack.nothing_written():
        error = stack.http.write_err(
            "job-admin:write:retry", {"id": failed["id"]}, OTHER_TENANT_ADMIN
        )
    assert (error.http_status, error.reason) == (404, "job_row_not_found")

    retried = stack.http.write_ok("job-admin:write:retry", {"id": failed["id"]}, OPERATOR)
    assert (retried["job"], retried["state"]) == (NIGHTLY, "pending")
