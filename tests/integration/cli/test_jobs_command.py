"""``asanoha jobs runs``: the newest attempts, and only the failures with ``--failed``."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from asanoha.platform.store.database import normalize_url
from tests.integration.cli.conftest import Project


def test_runs_lists_attempts_and_failures(project: Project) -> None:
    assert project.run("migrate", "--app", "shop:app").returncode == 0
    now = dt.datetime.now(dt.UTC)
    engine = create_engine(normalize_url(project.database.url), poolclass=NullPool)
    with engine.begin() as conn:
        for task, status, error in (("t-1", "succeeded", None), ("t-2", "failed", "Boom: no")):
            conn.execute(
                text(
                    "INSERT INTO asanoha_job_runs (job_qn, task_id, attempt, status, error,"
                    " started_at, finished_at) VALUES ('shop:job:x', :task, 1, :status, :error,"
                    " :now, :now)"
                ),
                {"task": task, "status": status, "error": error, "now": now},
            )
    engine.dispose()
    every = project.run("jobs", "runs", "--app", "shop:app")
    assert every.returncode == 0, every.stderr
    assert "t-1" in every.stdout and "t-2" in every.stdout and "Boom: no" in every.stdout
    failed = project.run("jobs", "runs", "--app", "shop:app", "--failed")
    assert "t-2" in failed.stdout and "t-1" not in failed.stdout
