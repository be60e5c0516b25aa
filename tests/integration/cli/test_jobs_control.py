"""``asanoha jobs cancel``: a pending job is cancelled, a finished one refused (exit 1)."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from sqlalchemy import select
from typer.testing import CliRunner, Result

from asanoha import App
from asanoha.cli import cli
from asanoha.platform.model import Feature

#: The application the commands load (``--app`` below); each test sets it to its stack's.
APP: App | None = None
APP_OPTION = ["--app", f"{__name__}:APP"]
NOTE = "clijobs:job:note"


def feature() -> Feature:
    jobs = Feature("clijobs")

    @jobs.job("note", manual=True)
    def note(payload: dict[str, Any], ctx: Any) -> None:
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
