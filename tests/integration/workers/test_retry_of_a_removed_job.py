"""A job that failed for good and whose definition the application no longer declares: no
worker can run it, so a retry is refused, naming the job, and changes nothing."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from sqlalchemy import select, update
from typer.testing import CliRunner

from asanoha import App
from asanoha.cli import cli
from asanoha.handlers import job_admin
from asanoha.platform.model import SessionUser
from asanoha.testing import TestUsers
from tests.integration.handlers.flaky import NOTE_CREATE, Switch, flaky_feature

#: A job QN the application does not declare (any more).
REMOVED = "flaky:job:removed"
OPERATOR = SessionUser.of("ops-1", TestUsers.admin.tenant_id, ["SystemAdmin"])
#: The application ``asanoha jobs`` loads below.
APP: App | None = None


def removed_job_stack(asanoha_stack: Any) -> tuple[Any, Any]:
    """A stack whose one job row failed for good, for a job QN it does not declare."""
    stack = asanoha_stack(features=[flaky_feature(Switch()), job_admin.feature])
    stack.http.write_ok(NOTE_CREATE, {"text": "hi"}, TestUsers.admin)
    outbox = stack.tables.outbox
    with stack.db.begin() as conn:
        conn.execute(
            update(outbox).values(job_qn=REMOVED, state="failed", attempt=1, last_error="Boom")
        )
        row = conn.execute(select(outbox)).one()
    assert stack.registry.job(REMOVED) is None
    return stack, row


def test_retrying_a_job_the_application_no_longer_declares_is_refused_over_http(asanoha_stack):
    stack, row = removed_job_stack(asanoha_stack)
    with stack.nothing_written():
        error = stack.http.write_err("job-admin:write:retry", {"id": str(row.id)}, OPERATOR)
    assert (error.http_status, error.reason) == (404, "job_not_found")
    assert error.details["job"] == REMOVED
    assert REMOVED in error.message


def test_retrying_a_job_the_application_no_longer_declares_is_refused_on_the_command_line(
    asanoha_stack, monkeypatch: pytest.MonkeyPatch
):
    stack, row = removed_job_stack(asanoha_stack)
    monkeypatch.setattr(sys.modules[__name__], "APP", stack.app)
    with stack.nothing_written():
        result = CliRunner().invoke(
            cli, ["jobs", "retry", str(row.id), "--app", f"{__name__}:APP"], env={"COLUMNS": "250"}
        )
    assert result.exit_code == 1
    assert "job_not_found" in result.output and REMOVED in result.output
