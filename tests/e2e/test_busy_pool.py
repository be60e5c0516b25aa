"""An ``asanoha worker`` whose only pool process runs a long job still delivers a consumer
on a wake-up at once: wake-ups run on threads of the worker's own, never in the pool."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import func, select

from asanoha.app import App
from asanoha.platform.model import SessionUser
from asanoha.workers.drain import Drainer
from tests.e2e.busy_pool_app import feature
from tests.e2e.conftest import e2e_app, start_asanoha_worker, stop_processes, wait_until
from tests.e2e.test_job_control_processes import row, wait_for
from tests.private_redis import PrivateRedis

pytestmark = pytest.mark.e2e

APP = "tests.e2e.busy_pool_app:app"
ADMIN = SessionUser.of("admin-1", "default", ["Admin"])


@pytest.fixture
def app(private_redis: PrivateRedis) -> Iterator[App]:
    with e2e_app([feature], private_redis.url) as app:
        yield app


def _delivered(app: App) -> int:
    table = app.service.tables.entity("busypool:delivery")
    with app.database.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar_one())


def test_a_wake_up_delivers_while_the_only_pool_process_runs_a_job(app, tmp_path: Path):
    release = tmp_path / "release"
    # Without the tick, only the wake-up a write publishes can deliver the event.
    worker = start_asanoha_worker(
        app.settings, APP, concurrency=1, ASANOHA_CONSUMER_TICK_INTERVAL="0"
    )
    try:
        row_id = app.service.enqueue_job(
            "busypool:job:hold", {"release": str(release)}, SessionUser.system("default")
        )
        wait_for(app, row_id, "running")
        app.service.dispatch_write("busypool:write:ring", {"n": 1}, ADMIN)
        wait_until(lambda: _delivered(app) == 1, "the event was delivered")
        # Delivered while the job still held the pool's only process.
        assert row(app, row_id)[0] == "running"
        release.touch()
        summary = Drainer(app).drain(timeout=60)
        assert summary.failed == 0
        assert row(app, row_id)[0] == "succeeded"
    finally:
        release.touch()
        stop_processes([worker])
