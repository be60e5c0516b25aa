"""A worker process killed with SIGKILL mid-job: the job runs again on another worker."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from sqlalchemy import select

from asanoha.app import App
from asanoha.platform.settings import Settings
from asanoha.testing.databases import TestDatabase
from asanoha.testing.stack import amqp_url_for_tests, broker_url_for_tests
from asanoha.workers import dispatch_job
from asanoha.workers.lanes import app_queues, delete_queues
from tests.e2e.killable_app import feature
from tests.private_redis import PrivateRedis

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
SIGNAL_URL = broker_url_for_tests()
BROKERS = {"rabbitmq": amqp_url_for_tests()}
#: Seconds any single wait of this test may take; the whole test stays well under a minute.
STEP_TIMEOUT = 20


@pytest.fixture(params=["redis", pytest.param("rabbitmq", marks=pytest.mark.rabbitmq)])
def e2e_app(request: pytest.FixtureRequest, private_redis: PrivateRedis) -> Iterator[App]:
    """Settings shared by this process and the workers: own database, queues, short timeout."""
    suffix = secrets.token_hex(6)
    database = TestDatabase.create("postgres", f"asanoha_e2e_{suffix}")
    broker = private_redis.url if request.param == "redis" else BROKERS[request.param]
    settings = Settings(
        database_url=database.url,
        broker_url=broker,
        queue_prefix=f"asanoha-e2e-{suffix}",
        # Short, so the killed Redis consumer's message comes back within the test (the
        # job's timeout of 1 s plus the hard-limit grace fits below it).
        visibility_timeout=8,
    )
    app = App([feature], settings)
    try:
        app.create_schema()
        yield app
    finally:
        delete_queues(app.celery, app_queues(settings))
        app.close()
        database.drop()


def _start_worker(app: App, name: str, role: str) -> subprocess.Popen[bytes]:
    settings = app.settings
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "src")]),
        "ASANOHA_DATABASE_URL": settings.database_url,
        "ASANOHA_BROKER_URL": settings.broker_url,
        "ASANOHA_QUEUE_PREFIX": settings.queue_prefix,
        "ASANOHA_VISIBILITY_TIMEOUT": str(settings.visibility_timeout),
        "E2E_SIGNAL_URL": SIGNAL_URL,
        "E2E_ROLE": role,
    }
    command = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "tests.e2e.killable_app:celery",
        "worker",
        "--pool=solo",
        f"--queues={','.join(app_queues(settings))}",
        f"--hostname={name}@%h",
        "--without-mingle",
        "--without-gossip",
        "--loglevel=WARNING",
    ]
    return subprocess.Popen(command, cwd=ROOT, env=env)


def _pop(signals: redis.Redis, key: str) -> int:
    """Block until the job reports on ``key``; return the reporting worker's pid."""
    item = signals.blpop([key], timeout=STEP_TIMEOUT)
    assert item is not None, f"no report on {key} within {STEP_TIMEOUT} s"
    return int(item[1])


def test_a_job_whose_worker_is_killed_runs_again_on_another_worker(e2e_app: App) -> None:
    # Blocking pops wait up to STEP_TIMEOUT: the client must not time out first.
    signals = redis.Redis.from_url(SIGNAL_URL, socket_timeout=STEP_TIMEOUT + 5)
    key = f"asanoha-e2e:{e2e_app.settings.queue_prefix}"
    workers: list[subprocess.Popen[bytes]] = []
    try:
        victim = _start_worker(e2e_app, "victim", "victim")
        workers.append(victim)
        task_id = dispatch_job(e2e_app, "e2e:job:long-running", {"signal_key": key})
        assert _pop(signals, f"{key}:started") == victim.pid

        rescuer = _start_worker(e2e_app, "rescuer", "rescuer")
        workers.append(rescuer)
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(timeout=STEP_TIMEOUT)

        assert _pop(signals, f"{key}:started") == rescuer.pid
        assert _pop(signals, f"{key}:done") == rescuer.pid
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.send_signal(signal.SIGTERM)
        for worker in workers:
            try:
                worker.wait(timeout=STEP_TIMEOUT)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()
        signals.delete(f"{key}:started", f"{key}:done")

    runs = e2e_app.service.tables.job_runs
    with e2e_app.database.connect() as conn:
        rows = conn.execute(select(runs).where(runs.c.task_id == task_id).order_by(runs.c.id)).all()
    # The attempt that died with its worker counts: it is in the history as crashed, and
    # the job completed on its retry.
    assert [(row.attempt, row.status) for row in rows] == [(1, "crashed"), (2, "succeeded")]
    assert "WorkerLostError" in rows[0].error
