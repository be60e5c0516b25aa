"""``asanoha worker`` processes on Postgres and a private Redis: nothing lost, hidden or
repeated under load, a broker outage, and jobs that kill their process."""

from __future__ import annotations

import secrets
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import func, select

from asanoha.app import App
from asanoha.platform.model import SessionUser
from asanoha.platform.settings import Settings
from asanoha.testing.databases import TestDatabase
from asanoha.workers import JobFailedError
from asanoha.workers.drain import Drainer
from tests.e2e.conftest import start_asanoha_worker, stop_processes, wait_until
from tests.e2e.job_app import feature
from tests.e2e.outage_app import VISIBILITY_TIMEOUT
from tests.e2e.outage_app import feature as outage
from tests.private_redis import PrivateRedis

pytestmark = pytest.mark.e2e

APP = "tests.e2e.job_app:app"
ADMIN = SessionUser.of("admin-1", "default", ["Admin"])


@pytest.fixture
def fleet(private_redis: PrivateRedis) -> Iterator[tuple[App, list[subprocess.Popen[bytes]]]]:
    """This process's view of the application (it enqueues and reads), and the list of
    worker processes the test starts (stopped at the end)."""
    suffix = secrets.token_hex(6)
    database = TestDatabase.create("postgres", f"asanoha_e2e_{suffix}")
    settings = Settings(
        database_url=database.url,
        broker_url=private_redis.url,
        queue_prefix=f"asanoha-e2e-{suffix}",
        visibility_timeout=60,
        job_timeout=20,
    )
    app = App([feature], settings)
    workers: list[subprocess.Popen[bytes]] = []
    try:
        app.create_schema()
        yield app, workers
    finally:
        stop_processes(workers)
        app.close()
        database.drop()


def _count(app: App, table: Any, *where: Any) -> int:
    with app.database.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(table).where(*where)).scalar_one())


def test_two_pool_processes_run_a_backlog_of_writing_jobs_losing_and_repeating_none(fleet):
    app, workers = fleet
    for n in range(300):
        app.service.enqueue_job("fleet:job:mark", {"n": n}, SessionUser.system("default"))
    workers.append(start_asanoha_worker(app.settings, APP, concurrency=2))
    summary = Drainer(app).drain(timeout=120)

    marks = app.service.tables.entity("fleet:mark")
    with app.database.connect() as conn:
        written = sorted(conn.execute(select(marks.c.n)).scalars())
    assert written == list(range(300))  # 0 lost, 0 written twice
    runs = app.service.tables.job_runs
    assert (summary.succeeded, summary.retried, summary.failed) == (300, 0, 0)
    assert _count(app, runs) == 300  # every run recorded, 0 spurious retries
    assert _count(app, runs, runs.c.status == "succeeded", runs.c.attempt == 1) == 300
    outbox = app.service.tables.outbox
    assert _count(app, outbox, outbox.c.state == "succeeded") == 300


def test_a_write_committed_while_the_broker_is_down_runs_its_job_once_it_is_back(
    fleet, private_redis
):
    app, workers = fleet
    private_redis.stop()
    # The write commits; publishing its job fails, so the row waits for a relay.
    assert app.service.dispatch_write("fleet:write:order", {"n": 7}, ADMIN) == {"n": 7}
    outbox = app.service.tables.outbox
    assert _count(app, outbox, outbox.c.published_at.is_(None)) == 1

    private_redis.start()
    # Only a worker runs: its relay publishes the row, its pool runs the job.
    workers.append(start_asanoha_worker(app.settings, APP, concurrency=1))
    wait_until(lambda: _count(app, outbox, outbox.c.state == "succeeded") == 1, "the job succeeded")
    marks = app.service.tables.entity("fleet:mark")
    with app.database.connect() as conn:
        assert list(conn.execute(select(marks.c.n)).scalars()) == [7]


def test_a_job_that_kills_its_process_on_every_attempt_fails_after_its_retries(fleet):
    app, workers = fleet
    task_id = app.service.enqueue_job("fleet:job:explode", {}, SessionUser.system("default"))
    workers.append(start_asanoha_worker(app.settings, APP, concurrency=1))
    with pytest.raises(JobFailedError, match="fleet:job:explode: WorkerLostError"):
        Drainer(app).drain(timeout=60)
    runs = app.service.tables.job_runs
    with app.database.connect() as conn:
        rows = conn.execute(
            select(runs.c.attempt, runs.c.status)
            .where(runs.c.task_id == str(task_id))
            .order_by(runs.c.id)
        ).all()
    # Each attempt that died with its process counts: one retry, then the final failure.
    assert [tuple(row) for row in rows] == [(1, "crashed"), (2, "failed")]
    outbox = app.service.tables.outbox
    assert _count(app, outbox, outbox.c.state == "failed") == 1


def test_two_workers_holding_unacked_messages_outlive_a_redis_shutdown_and_run_every_job(
    private_redis: PrivateRedis,
) -> None:
    """The outage test of ``outage_app``: its short visibility timeout gives back within the
    test the messages the workers held when Redis went away."""
    suffix = secrets.token_hex(6)
    database = TestDatabase.create("postgres", f"asanoha_e2e_{suffix}")
    settings = Settings(
        database_url=database.url,
        broker_url=private_redis.url,
        queue_prefix=f"asanoha-e2e-{suffix}",
        visibility_timeout=VISIBILITY_TIMEOUT,
        job_timeout=3,
    )
    app = App([outage], settings)
    workers: list[subprocess.Popen[bytes]] = []
    try:
        app.create_schema()
        for n in range(40):
            app.service.enqueue_job("outage:job:linger", {"n": n}, SessionUser.system("default"))
        for _ in range(2):
            workers.append(start_asanoha_worker(settings, "tests.e2e.outage_app:app"))
        marks = app.service.tables.entity("outage:mark")
        # Both workers are busy: each holds the messages of the jobs it runs, unacknowledged.
        wait_until(lambda: _count(app, marks) >= 4, "the workers run jobs")

        private_redis.stop()
        # The outage lasts a while (a real delay): the workers lose Redis and retry.
        time.sleep(10)
        assert [worker.poll() for worker in workers] == [None, None]
        private_redis.start()

        Drainer(app).drain(timeout=120)
        assert [worker.poll() for worker in workers] == [None, None]
        with app.database.connect() as conn:
            written = sorted(conn.execute(select(marks.c.n)).scalars())
        assert written == list(range(40))  # 0 lost, 0 written twice
    finally:
        stop_processes(workers)
        app.close()
        database.drop()
