"""An attempt whose pool process is killed at its hard time limit, or exits, in a real
prefork ``asanoha worker``: it ends as crashed at once and the next attempt runs after its
backoff, not after the visibility timeout nor the attempt's time limit."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import select

from asanoha.app import App
from asanoha.platform.model import SessionUser
from asanoha.platform.settings import Settings
from asanoha.testing.databases import TestDatabase
from asanoha.workers.lanes import app_queues, delete_queues
from asanoha.workers.retry_policy import HARD_LIMIT_GRACE
from tests.e2e.conftest import STEP_TIMEOUT, start_asanoha_worker, stop_processes
from tests.e2e.test_job_retry import wait_for_state
from tests.e2e.time_limit_app import feature
from tests.private_redis import PrivateRedis

pytestmark = pytest.mark.e2e

APP = "tests.e2e.time_limit_app:app"
RABBITMQ = "amqp://guest:guest@127.0.0.1:5672//"
#: Far longer than the test waits: a job that finishes proves nothing waited for it.
VISIBILITY_TIMEOUT = 120


@pytest.fixture(params=["redis", pytest.param("rabbitmq", marks=pytest.mark.rabbitmq)])
def time_limit_app(request: pytest.FixtureRequest, private_redis: PrivateRedis) -> Iterator[App]:
    suffix = secrets.token_hex(6)
    database = TestDatabase.create("postgres", f"asanoha_e2e_{suffix}")
    settings = Settings(
        database_url=database.url,
        broker_url=private_redis.url if request.param == "redis" else RABBITMQ,
        queue_prefix=f"asanoha-e2e-{suffix}",
        visibility_timeout=VISIBILITY_TIMEOUT,
    )
    app = App([feature], settings)
    try:
        app.create_schema()
        yield app
    finally:
        delete_queues(app.celery, app_queues(settings))
        app.close()
        database.drop()


def runs_until_succeeded(app: App, job_qn: str) -> list[Any]:
    """Enqueue ``job_qn``, run a prefork worker until its row succeeds at attempt 2, and
    return its run rows in order."""
    row_id = app.service.enqueue_job(job_qn, {}, SessionUser.system("default"))
    worker = start_asanoha_worker(app.settings, APP, concurrency=1)
    try:
        assert wait_for_state(app, row_id, "succeeded") == ("succeeded", 2)
    finally:
        stop_processes([worker])
    runs = app.service.tables.job_runs
    with app.database.connect() as conn:
        return list(
            conn.execute(
                select(runs).where(runs.c.task_id == str(row_id)).order_by(runs.c.id)
            ).all()
        )


def test_an_attempt_killed_at_its_hard_time_limit_ends_crashed_and_the_retry_follows(
    time_limit_app: App,
) -> None:
    assert STEP_TIMEOUT < VISIBILITY_TIMEOUT
    rows = runs_until_succeeded(time_limit_app, "stubborn:job:ignore-limit")
    assert [(row.attempt, row.status) for row in rows] == [(1, "crashed"), (2, "succeeded")]
    assert "TimeLimitExceeded" in rows[0].error
    # The first attempt ran until the hard limit killed it, no less.
    assert (rows[0].finished_at - rows[0].started_at).total_seconds() >= 1 + HARD_LIMIT_GRACE


def test_an_attempt_whose_pool_process_exits_ends_crashed_before_its_time_limit(
    time_limit_app: App,
) -> None:
    # The job's timeout (60 s) is longer than the test waits: the worker's main process
    # ends the attempt when the pool process exits, no later delivery has to judge it.
    assert STEP_TIMEOUT < 60
    rows = runs_until_succeeded(time_limit_app, "stubborn:job:exit-once")
    assert [(row.attempt, row.status) for row in rows] == [(1, "crashed"), (2, "succeeded")]
    assert "WorkerLostError" in rows[0].error
