"""``asanoha jobs retry`` as an operator runs it, against a real ``asanoha worker``: the job
that failed for good runs again in the worker's pool with its full attempt budget."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from asanoha.app import App
from asanoha.platform.model import SessionUser
from tests.e2e.conftest import (
    ROOT,
    STEP_TIMEOUT,
    e2e_app,
    start_asanoha_worker,
    stop_processes,
    worker_environment,
)
from tests.e2e.retry_app import feature
from tests.private_redis import PrivateRedis

pytestmark = pytest.mark.e2e

APP = "tests.e2e.retry_app:app"


@pytest.fixture
def retry_app(private_redis: PrivateRedis) -> Iterator[App]:
    """This process's view of the application, on its own database and the private Redis."""
    with e2e_app([feature], private_redis.url) as app:
        yield app


def job_state(app: App, row_id: object) -> tuple[str, int]:
    outbox = app.service.tables.outbox
    with app.database.connect() as conn:
        row = conn.execute(
            select(outbox.c.state, outbox.c.attempt).where(outbox.c.id == row_id)
        ).one()
    return row.state, row.attempt


def wait_for_state(app: App, row_id: object, state: str) -> tuple[str, int]:
    """Poll the job row: the job runs in another process."""
    deadline = time.monotonic() + STEP_TIMEOUT
    found = job_state(app, row_id)
    while found[0] != state:
        if time.monotonic() > deadline:
            raise AssertionError(f"job {row_id} is {found}, not {state} within {STEP_TIMEOUT} s")
        time.sleep(0.1)
        found = job_state(app, row_id)
    return found


def asanoha(app: App, flag: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``asanoha ARGS`` with the application's settings, as an operator runs it."""
    return subprocess.run(
        [sys.executable, "-m", "asanoha.cli", *args, "--app", APP],
        cwd=ROOT,
        env=worker_environment(app.settings, RETRY_APP_FLAG=str(flag)),
        capture_output=True,
        text=True,
        timeout=STEP_TIMEOUT * 2,
    )


def test_a_job_retried_from_the_command_line_runs_again_on_a_worker(retry_app, tmp_path):
    flag = tmp_path / "mail-server-is-up"
    row_id = retry_app.service.enqueue_job("retrying:job:send", {}, SessionUser.system("default"))
    worker = start_asanoha_worker(retry_app.settings, APP, concurrency=1, RETRY_APP_FLAG=str(flag))
    try:
        assert wait_for_state(retry_app, row_id, "failed") == ("failed", 2)
        flag.touch()
        retried = asanoha(retry_app, flag, "jobs", "retry", str(row_id))
        assert retried.returncode == 0, retried.stdout + retried.stderr
        assert "pending again after attempt 2 failed; published" in retried.stdout
        assert wait_for_state(retry_app, row_id, "succeeded") == ("succeeded", 1)
    finally:
        stop_processes([worker])
    runs = retry_app.service.tables.job_runs
    with retry_app.database.connect() as conn:
        rows = conn.execute(select(runs.c.attempt, runs.c.status).order_by(runs.c.id)).all()
    assert [tuple(row) for row in rows] == [
        (1, "retrying"),
        (2, "failed"),
        (2, "requeued"),
        (1, "succeeded"),
    ]
    again = asanoha(retry_app, flag, "jobs", "retry", str(row_id))
    assert again.returncode == 1
    assert "job_not_failed" in again.stderr
