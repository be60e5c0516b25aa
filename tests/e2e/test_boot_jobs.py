"""Boot jobs under a real fleet: two ``asanoha worker`` processes started together run a
``run_on_boot`` job once per release; a restart of the same release runs nothing more, and a
new release runs it again."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from asanoha import App
from tests.e2e.boot_app import feature
from tests.e2e.conftest import ROOT, STEP_TIMEOUT, e2e_app, stop_processes, worker_environment
from tests.private_redis import PrivateRedis

pytestmark = pytest.mark.e2e

APP = "tests.e2e.boot_app:app"
WARM = "booting:job:warm"


@pytest.fixture
def fleet(private_redis: PrivateRedis) -> Iterator[tuple[App, list[subprocess.Popen[bytes]]]]:
    workers: list[subprocess.Popen[bytes]] = []
    with e2e_app([feature], private_redis.url) as app:
        try:
            yield app, workers
        finally:
            stop_processes(workers)


def rows_of(app: App) -> list[Any]:
    outbox = app.service.tables.outbox
    with app.database.connect() as conn:
        return list(conn.execute(select(outbox).where(outbox.c.job_qn == WARM)).all())


def runs_of(app: App) -> list[Any]:
    runs = app.service.tables.job_runs
    with app.database.connect() as conn:
        return list(conn.execute(select(runs).where(runs.c.job_qn == WARM)).all())


def wait_for_runs(app: App, count: int, logs: Path) -> None:
    deadline = time.monotonic() + 4 * STEP_TIMEOUT
    while time.monotonic() < deadline:
        if len([run for run in runs_of(app) if run.status == "succeeded"]) >= count:
            return
        time.sleep(0.2)
    output = "\n".join(log.read_text(errors="replace")[-3000:] for log in logs.glob("*.log"))
    raise AssertionError(f"{WARM} did not run {count} time(s): {runs_of(app)}\n{output}")


def start_worker(app: App, release: str, log: Path) -> subprocess.Popen[bytes]:
    """``asanoha worker`` of ``release``, its output in ``log``."""
    command = [sys.executable, "-m", "asanoha.cli", "worker", "--app", APP, "--concurrency", "2"]
    environment = worker_environment(app.settings, ASANOHA_RELEASE=release)
    with log.open("ab") as out:
        return subprocess.Popen(command, cwd=ROOT, env=environment, stdout=out, stderr=out)


def test_two_workers_started_together_run_a_boot_job_once_per_release(fleet, tmp_path):
    app, workers = fleet
    for n in range(2):
        workers.append(start_worker(app, "r1", tmp_path / f"worker-{n}.log"))
    wait_for_runs(app, 1, tmp_path)
    # Both workers are ready by now or soon; give the second its moment to enqueue.
    time.sleep(3)
    stop_processes(workers)
    workers.clear()
    [row] = rows_of(app)
    assert (row.state, row.idempotency_key) == ("succeeded", f"{WARM}@boot:r1")
    assert len(runs_of(app)) == 1
    # The same release restarted: nothing more; a new release: once more.
    workers.append(start_worker(app, "r1", tmp_path / "worker-r1.log"))
    workers.append(start_worker(app, "r2", tmp_path / "worker-r2.log"))
    wait_for_runs(app, 2, tmp_path)
    time.sleep(3)
    keys = sorted(row.idempotency_key for row in rows_of(app))
    assert keys == [f"{WARM}@boot:r1", f"{WARM}@boot:r2"]
    assert [run.status for run in runs_of(app)] == ["succeeded", "succeeded"]
