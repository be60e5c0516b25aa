"""A prefork worker tells Flower that a delivery ran nothing: the task shows ``IGNORED`` with
why, and the same row's task shows ``SUCCESS`` once it has run."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from asanoha.platform.service import OutboxMessage
from tests.e2e.conftest import (
    ROOT,
    STEP_TIMEOUT,
    e2e_app,
    start_asanoha_worker,
    stop_processes,
    worker_environment,
)
from tests.e2e.ignored_app import feature
from tests.e2e.test_operator_fleet import free_port
from tests.private_redis import PrivateRedis

pytestmark = pytest.mark.e2e

APP = "tests.e2e.ignored_app:app"
JOB = "shop:job:sync-stock"
#: Seconds a worker and Flower may take to start and see each other on a loaded machine.
START_TIMEOUT = 120


def wait_for(check: Callable[[], Any], what: str, within: float = STEP_TIMEOUT) -> Any:
    deadline = time.monotonic() + within
    while True:
        try:
            found = check()
        except httpx.TransportError:
            found = None  # not listening yet
        if found:
            return found
        assert time.monotonic() < deadline, f"not within {within:g} s: {what}"
        time.sleep(0.2)


def test_flower_shows_a_delivery_of_a_paused_job_ignored_then_its_run_succeeded(
    private_redis: PrivateRedis,
) -> None:
    with e2e_app([feature], private_redis.url) as app:
        port = free_port()
        env = worker_environment(app.settings, FLOWER_UNAUTHENTICATED_API="true")
        flower_command = [sys.executable, "-m", "asanoha.cli", "flower", "--app", APP]
        flower_command += ["--no-auth", "--port", str(port)]
        processes = [
            start_asanoha_worker(app.settings, APP, concurrency=1),
            subprocess.Popen(
                flower_command,
                cwd=ROOT,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            ),
        ]
        base = f"http://127.0.0.1:{port}"

        def tasks() -> dict[str, Any]:
            listed: dict[str, Any] = httpx.get(f"{base}/api/tasks", timeout=5).json()
            return listed

        try:
            wait_for(
                lambda: httpx.get(f"{base}/api/workers?refresh=1", timeout=10).json(),
                "Flower sees the worker",
                START_TIMEOUT,
            )
            app.jobs.pause(JOB)
            row = app.jobs.run(JOB, {})
            row_id = str(row)
            # A delivery of the paused job's row (a message sent before the pause): it waits.
            app.celery_jobs.publisher.publish(OutboxMessage(row, JOB))
            ignored = wait_for(
                lambda: tasks().get(row_id, {}).get("state") == "IGNORED" and tasks()[row_id],
                "Flower shows the delivery IGNORED",
            )
            assert ignored["name"] == JOB
            assert ignored["result"] == "not run: waiting: its job is paused"
            app.jobs.resume(JOB)
            ran = wait_for(
                lambda: tasks().get(row_id, {}).get("state") == "SUCCESS" and tasks()[row_id],
                "Flower shows the run SUCCESS",
            )
            assert ran["succeeded"]
        finally:
            stop_processes(processes)
