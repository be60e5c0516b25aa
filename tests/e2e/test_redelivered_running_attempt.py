"""On RabbitMQ a message comes again while its attempt still runs when the worker's
connection drops (a network blip, ``consumer_timeout``): the redelivery must not be taken
for a crashed attempt, which would start the next attempt beside the running one."""

from __future__ import annotations

import json
import re
import secrets
import subprocess
from collections.abc import Iterator

import pytest
import redis
from sqlalchemy import select

from asanoha.app import App
from asanoha.platform.model import SessionUser
from asanoha.platform.settings import Settings
from asanoha.testing.databases import TestDatabase
from asanoha.workers.lanes import app_queues, delete_queues
from tests.e2e.conftest import STEP_TIMEOUT, start_asanoha_worker, stop_processes
from tests.e2e.redelivery_app import feature
from tests.e2e.test_job_retry import wait_for_state

pytestmark = [pytest.mark.e2e, pytest.mark.rabbitmq]

APP = "tests.e2e.redelivery_app:app"
RABBITMQ = "amqp://guest:guest@127.0.0.1:5672//"
SIGNAL_URL = "redis://127.0.0.1:6379/0"


@pytest.fixture
def redelivery_app() -> Iterator[App]:
    suffix = secrets.token_hex(6)
    database = TestDatabase.create("postgres", f"asanoha_e2e_{suffix}")
    settings = Settings(
        database_url=database.url,
        broker_url=RABBITMQ,
        queue_prefix=f"asanoha-e2e-{suffix}",
        visibility_timeout=60,
    )
    app = App([feature], settings)
    try:
        app.create_schema()
        yield app
    finally:
        delete_queues(app.celery, app_queues(settings))
        app.close()
        database.drop()


def close_broker_connections_of(pid: int) -> int:
    """Have RabbitMQ close every connection of the process ``pid`` (as when the network
    drops it); return how many it closed. Only this process's: other tests share the broker."""
    sockets = subprocess.run(
        ["ss", "-tnpH", "state", "established", "dport", "= :5672"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    ports = {
        int(match.group(1))
        for line in sockets.splitlines()
        if f"pid={pid}," in line and (match := re.search(r"127\.0\.0\.1:(\d+)\s", line))
    }
    listed = subprocess.run(
        ["rabbitmqctl", "-q", "list_connections", "pid", "peer_port"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    closed = 0
    for line in listed.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit() and int(parts[1]) in ports:
            subprocess.run(
                ["rabbitmqctl", "-q", "close_connection", parts[0], "network dropped (test)"],
                capture_output=True,
                check=True,
            )
            closed += 1
    return closed


def test_a_redelivery_while_the_attempt_still_runs_does_not_start_another_attempt(
    redelivery_app: App,
) -> None:
    signals = redis.Redis.from_url(SIGNAL_URL, socket_timeout=STEP_TIMEOUT + 5)
    key = f"asanoha-e2e:{redelivery_app.settings.queue_prefix}"
    worker = start_asanoha_worker(
        redelivery_app.settings, APP, concurrency=2, E2E_SIGNAL_URL=SIGNAL_URL
    )
    try:
        row_id = redelivery_app.service.enqueue_job(
            "redelivered:job:slow", {"signal_key": key}, SessionUser.system("default")
        )
        started = signals.blpop([key], timeout=STEP_TIMEOUT)
        assert started is not None, "the job did not start"
        assert json.loads(started[1])[:2] == ["started", 1]
        # The message comes again (redelivered) to the worker, which reconnects, while
        # attempt 1 still runs in its pool.
        assert close_broker_connections_of(worker.pid) > 0
        assert wait_for_state(redelivery_app, row_id, "succeeded") == ("succeeded", 1)
    finally:
        stop_processes([worker])
        reports = [json.loads(item) for item in signals.lrange(key, 0, -1)]
        signals.delete(key)
    # Attempt 1 ran to its end, alone; no other attempt started.
    assert [report[:2] for report in reports] == [["ended", 1]]
    runs = redelivery_app.service.tables.job_runs
    with redelivery_app.database.connect() as conn:
        rows = conn.execute(
            select(runs.c.attempt, runs.c.status).where(runs.c.task_id == str(row_id))
        ).all()
    assert [tuple(row) for row in rows] == [(1, "succeeded")]
