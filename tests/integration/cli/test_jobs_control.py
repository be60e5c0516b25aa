"""``asanoha jobs cancel`` and ``asanoha jobs run``: cancel a pending job (a finished one is
refused, exit 1); run a job by hand, its payload validated against the job's schema."""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import pytest
from pydantic import BaseModel, Field
from sqlalchemy import select
from typer.testing import CliRunner, Result

from asanoha import App, ValidationError
from asanoha.cli import cli
from asanoha.handlers import job_admin
from asanoha.platform.model import Feature, SessionUser
from asanoha.testing import TestUsers
from asanoha.workers import JobFailedError

#: The application the commands load (``--app`` below); each test sets it to its stack's.
APP: App | None = None
APP_OPTION = ["--app", f"{__name__}:APP"]
NOTE = "clijobs:job:note"


def feature() -> Feature:
    jobs = Feature("clijobs")

    @jobs.job("note", manual=True)
    def note(payload: dict[str, Any], ctx: Any) -> None:
        return None

    @jobs.job("tidy", cron="0 * * * *")
    def tidy(payload: dict[str, Any], ctx: Any) -> None:
        return None

    return jobs


@pytest.fixture
def stack(asanoha_stack: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A stack without a worker: its job rows stay pending."""
    made = asanoha_stack(features=[feature()])
    monkeypatch.setattr(sys.modules[__name__], "APP", made.app)
    return made


def jobs(*args: str) -> Result:
    return CliRunner().invoke(cli, ["jobs", *args, *APP_OPTION], env={"COLUMNS": "250"})


def rows(stack: Any) -> list[Any]:
    outbox = stack.tables.outbox
    with stack.db.connect() as conn:
        return list(conn.execute(select(outbox).order_by(outbox.c.created_at)).all())


def test_cancel_cancels_a_pending_job_and_refuses_a_finished_one(stack):
    job_id = stack.app.jobs.run(NOTE)
    cancelled = jobs("cancel", str(job_id))
    assert cancelled.exit_code == 0, cancelled.output
    assert f"{NOTE} {job_id}: cancelled" in cancelled.output
    assert [row.state for row in rows(stack)] == ["cancelled"]
    with stack.nothing_written():
        again = jobs("cancel", str(job_id))
    assert again.exit_code == 1
    assert "job_not_cancellable" in again.output
    assert jobs("cancel", "not-a-uuid").exit_code == 1


def test_run_refuses_a_job_not_declared_manual_and_enqueues_nothing(stack):
    with stack.nothing_written():
        refused = jobs("run", "clijobs:job:tidy", "--payload", '{"scope": "all"}')
    assert refused.exit_code == 1, refused.output
    assert "job_not_manual" in refused.output
    assert "manual=True" in refused.output


class Report(BaseModel):
    month: str = Field(pattern=r"^\d{4}-\d{2}$")
    copies: int = 1


def report_feature(seen: list[dict[str, Any]]) -> Feature:
    reports = Feature("reports")

    @reports.job("build", manual=True, schema=Report)
    def build(payload: dict[str, Any], ctx: Any) -> None:
        seen.append(payload)

    @reports.job("fan-out", manual=True)
    def fan_out(payload: dict[str, Any], ctx: Any) -> None:
        ctx.dispatch(REPORT, payload["report"])

    return reports


REPORT = "reports:job:build"
ADMIN = SessionUser.of("ops-1", TestUsers.admin.tenant_id, ["SystemAdmin"])


@pytest.fixture
def reports(asanoha_stack: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, list[Any]]:
    seen: list[dict[str, Any]] = []
    made = asanoha_stack(features=[report_feature(seen), job_admin.feature], jobs=True)
    monkeypatch.setattr(sys.modules[__name__], "APP", made.app)
    return made, seen


def test_run_validates_the_payload_against_the_jobs_schema_and_runs_it(reports):
    stack, seen = reports
    with stack.nothing_written():
        refused = jobs("run", REPORT, "--payload", '{"month": "May", "copies": "x"}')
    assert refused.exit_code == 2, refused.output
    assert "validation_error" in refused.output
    assert "month:" in refused.output and "copies:" in refused.output
    with stack.nothing_written():
        assert jobs("run", REPORT, "--payload", "[1]").exit_code == 2
        assert jobs("run", REPORT, "--payload", "{").exit_code == 2
        assert jobs("run", "reports:job:nope").exit_code == 1

    started = time.monotonic()
    ran = jobs("run", REPORT, "--payload", '{"month": "2026-05"}', "--delay", "1")
    assert ran.exit_code == 0, ran.output
    assert "pending, starts in 1 s; published" in ran.output
    stack.drain()
    assert time.monotonic() - started >= 1
    # The job runs on the validated payload, defaults filled in.
    assert seen == [{"month": "2026-05", "copies": 1}]


def test_every_manual_path_validates_the_payload_with_field_errors(reports):
    stack, seen = reports
    with stack.nothing_written(), pytest.raises(ValidationError) as refused:
        stack.app.service.enqueue_job(REPORT, {"month": "May"}, ADMIN)
    assert refused.value.http_status == 400
    assert [field["path"] for field in refused.value.details["fields"]] == ["month"]
    with stack.nothing_written(), pytest.raises(ValidationError):
        stack.app.jobs.run(REPORT, {})
    with stack.nothing_written():
        error = stack.http.write_err("job-admin:write:run", {"job": REPORT, "payload": {}}, ADMIN)
    assert (error.http_status, error.code) == (400, "validation_error")
    assert [field["path"] for field in error.details["fields"]] == ["month"]
    with stack.nothing_written():
        both = {
            "job": REPORT,
            "payload": {"month": "2026-05"},
            "delay": 1,
            "at": "2030-01-01T00:00:00Z",
        }
        error = stack.http.write_err("job-admin:write:run", both, ADMIN)
    assert (error.http_status, error.code) == (400, "validation_error")
    ran = stack.http.write_ok(
        "job-admin:write:run", {"job": REPORT, "payload": {"month": "2026-06"}}, ADMIN
    )
    assert ran["state"] == "pending"
    # ctx.dispatch is a manual path too: the refused payload fails the dispatching job.
    stack.dispatch_job("reports:job:fan-out", {"report": {"month": "June"}})
    with pytest.raises(JobFailedError, match="ValidationError"):
        stack.drain()
    assert seen == [{"month": "2026-06", "copies": 1}]


def test_pause_and_resume_a_job_and_list_the_pauses(stack):
    paused = jobs("pause", NOTE)
    assert paused.exit_code == 0, paused.output
    assert f"{NOTE}: paused" in paused.output
    assert f"{NOTE}: was paused" in jobs("pause", NOTE).output
    listed = jobs("pauses", "--json")
    assert [p["target"] for p in json.loads(listed.output)["pauses"]] == [NOTE]
    stack.app.jobs.run(NOTE)
    resumed = jobs("resume", NOTE)
    assert resumed.exit_code == 0, resumed.output
    assert f"{NOTE}: resumed; 1 waiting job(s) due now" in resumed.output
    assert f"{NOTE}: was not paused" in jobs("resume", NOTE).output
    with stack.nothing_written():
        unknown = jobs("pause", "clijobs:job:nope")
    assert unknown.exit_code == 1
    assert "no job, workflow or lane 'clijobs:job:nope'" in unknown.output


def test_pending_marks_the_rows_a_pause_of_their_job_or_lane_holds(stack):
    job_id = stack.app.jobs.run(NOTE)

    def pause_shown() -> Any:
        (row,) = json.loads(jobs("pending", "--json").output)["jobs"]
        return row["pause"]

    assert pause_shown() is None
    assert jobs("pause", "worker").exit_code == 0
    assert pause_shown() == "lane:worker"
    table = jobs("pending").output.splitlines()
    assert any("paused" in line for line in table)
    (row,) = [line for line in table if str(job_id) in line]
    assert "lane:worker" in row
    # Paused by itself as well: the job's own pause is the one shown.
    assert jobs("pause", NOTE).exit_code == 0
    assert pause_shown() == NOTE
    assert jobs("resume", NOTE).exit_code == 0
    assert jobs("resume", "worker").exit_code == 0
    assert pause_shown() is None


def test_runs_logs_shows_each_attempt_with_its_lines(asanoha_stack, monkeypatch):
    chatty = Feature("clilogs")

    @chatty.job("talk", manual=True)
    def talk(payload: dict[str, Any], ctx: Any) -> None:
        ctx.log.info("hello %s", payload["to"])

    made = asanoha_stack(features=[chatty], jobs=True)
    monkeypatch.setattr(sys.modules[__name__], "APP", made.app)
    job_id = made.dispatch_job("clilogs:job:talk", {"to": "ops"})
    made.drain()
    shown = jobs("runs", "--logs", str(job_id))
    assert shown.exit_code == 0, shown.output
    assert f"clilogs:job:talk {job_id} attempt 1: succeeded" in shown.output
    assert "  INFO hello ops" in shown.output
