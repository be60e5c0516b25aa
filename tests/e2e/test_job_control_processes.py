"""Cancel and snooze against a real ``asanoha worker`` (prefork): a running job cancelled
from another process stops at its checkpoint and ends cancelled without a retry; a snoozed
job runs again at the same attempt."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from asanoha.app import App
from tests.e2e.conftest import STEP_TIMEOUT, e2e_app, start_asanoha_worker, stop_processes
from tests.e2e.control_app import feature
from tests.private_redis import PrivateRedis

pytestmark = pytest.mark.e2e

APP = "tests.e2e.control_app:app"
LONG, NAP = "control:job:long", "control:job:nap"


@pytest.fixture
def control_app(private_redis: PrivateRedis) -> Iterator[App]:
    """This process's view of the application, on its own database and the private Redis."""
    with e2e_app([feature], private_redis.url) as app:
        yield app


def row(app: App, row_id: object) -> tuple[str, int]:
    outbox = app.service.tables.outbox
    with app.database.connect() as conn:
        found = conn.execute(
            select(outbox.c.state, outbox.c.attempt).where(outbox.c.id == row_id)
        ).one()
    return found.state, found.attempt


def runs(app: App, row_id: object) -> list[tuple[int, str]]:
    table = app.service.tables.job_runs
    with app.database.connect() as conn:
        found = conn.execute(
            select(table.c.attempt, table.c.status)
            .where(table.c.task_id == str(row_id))
            .order_by(table.c.id)
        ).all()
    return [(attempt, status) for attempt, status in found]


def wait_for(app: App, row_id: object, state: str, within: float = 60) -> tuple[str, int]:
    deadline = time.monotonic() + within
    found = row(app, row_id)
    while found[0] != state:
        assert time.monotonic() < deadline, f"{row_id} is {found}, not {state}"
        time.sleep(0.1)
        found = row(app, row_id)
    return found


def test_a_worker_stops_a_cancelled_job_and_runs_a_snoozed_one_again(control_app, tmp_path: Path):
    app = control_app
    napped = tmp_path / "napped"
    worker = start_asanoha_worker(app.settings, APP, concurrency=2, CONTROL_APP_NAPPED=str(napped))
    try:
        long_id = app.jobs.run(LONG)
        wait_for(app, long_id, "running")
        assert app.jobs.cancel(long_id).state == "running"
        assert wait_for(app, long_id, "cancelled", STEP_TIMEOUT) == ("cancelled", 1)
        assert runs(app, long_id) == [(1, "cancelled")]

        started = time.monotonic()
        nap_id = app.jobs.run(NAP)
        assert wait_for(app, nap_id, "succeeded") == ("succeeded", 1)
        assert time.monotonic() - started >= 1.0
        assert napped.read_text() == "1"
        assert runs(app, nap_id) == [(1, "snoozed"), (1, "succeeded")]
    finally:
        stop_processes([worker])
