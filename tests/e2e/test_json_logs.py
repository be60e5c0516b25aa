"""``ASANOHA_LOG_FORMAT=json`` on a real ``asanoha worker``: every line it writes is a JSON
object, a failing attempt's lines name its job id, attempt and tenant, and no line holds a
payload value."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from asanoha.app import App
from asanoha.platform.model import SessionUser
from tests.e2e.conftest import ROOT, STEP_TIMEOUT, e2e_app, stop_processes, worker_environment
from tests.e2e.retry_app import feature
from tests.private_redis import PrivateRedis

pytestmark = pytest.mark.e2e

APP = "tests.e2e.retry_app:app"
TENANT = "tenant-logs"
#: A payload value: no line may hold it.
SECRET = "payload-value-91d7f3"


@pytest.fixture
def retry_app(private_redis: PrivateRedis) -> Iterator[App]:
    with e2e_app([feature], private_redis.url) as app:
        yield app


def wait_until_failed(app: App, row_id: object) -> None:
    """Poll the job row (the job runs in the worker's pool) until it failed for good."""
    outbox = app.service.tables.outbox
    deadline = time.monotonic() + STEP_TIMEOUT
    while time.monotonic() < deadline:
        with app.database.connect() as conn:
            state = conn.execute(select(outbox.c.state).where(outbox.c.id == row_id)).scalar()
        if state == "failed":
            return
        time.sleep(0.1)
    raise AssertionError(f"job {row_id} did not fail within {STEP_TIMEOUT} s")


def test_a_json_worker_writes_one_object_per_line_naming_a_failing_attempt(
    retry_app: App, tmp_path: Path
) -> None:
    output = tmp_path / "worker.log"
    # The flag file never exists: both attempts fail.
    env = worker_environment(
        retry_app.settings, ASANOHA_LOG_FORMAT="json", RETRY_APP_FLAG=str(tmp_path / "up")
    )
    command = [sys.executable, "-m", "asanoha.cli", "worker", "--app", APP, "--concurrency", "1"]
    with output.open("wb") as sink:
        worker = subprocess.Popen(command, cwd=ROOT, env=env, stdout=sink, stderr=sink)
        try:
            row_id = retry_app.service.enqueue_job(
                "retrying:job:send", {"note": SECRET}, SessionUser.system(TENANT)
            )
            wait_until_failed(retry_app, row_id)
            # The worker logs how the last attempt ended once the row says so.
            deadline = time.monotonic() + STEP_TIMEOUT
            while "raised unexpected" not in output.read_text(encoding="utf-8"):
                assert time.monotonic() < deadline, output.read_text(encoding="utf-8")
                time.sleep(0.1)
        finally:
            stop_processes([worker])

    text = output.read_text(encoding="utf-8")
    assert SECRET not in text
    lines: list[dict[str, Any]] = []
    for line in text.splitlines():
        if line.strip():
            parsed = json.loads(line)
            assert isinstance(parsed, dict), line
            assert {"timestamp", "level", "logger", "message"} <= parsed.keys(), line
            lines.append(parsed)
    assert any("ready" in line["message"] for line in lines), "the worker logged no ready line"

    of_job = [line for line in lines if line.get("job_id") == str(row_id)]
    for attempt in (1, 2):
        failing = [
            line
            for line in of_job
            if line.get("attempt") == attempt and "ConnectionError" in line["message"]
        ]
        assert failing, f"no line names the failure of attempt {attempt}: {of_job}"
        for line in failing:
            assert line["tenant"] == TENANT
            assert line["job"] == "retrying:job:send"


def test_a_json_beat_writes_only_json_lines(retry_app: App, tmp_path: Path) -> None:
    output = tmp_path / "beat.log"
    env = worker_environment(retry_app.settings, ASANOHA_LOG_FORMAT="json")
    command = [
        sys.executable, "-m", "asanoha.cli", "beat", "--app", APP,
        "--schedule", str(tmp_path / "schedule"),
    ]  # fmt: skip
    with output.open("wb") as sink:
        beat = subprocess.Popen(command, cwd=ROOT, env=env, stdout=sink, stderr=sink)
        try:
            deadline = time.monotonic() + STEP_TIMEOUT
            while "Starting" not in output.read_text(encoding="utf-8"):
                assert time.monotonic() < deadline, output.read_text(encoding="utf-8")
                assert beat.poll() is None, output.read_text(encoding="utf-8")
                time.sleep(0.1)
        finally:
            stop_processes([beat])
    lines = [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines() if line]
    assert any(line["logger"] == "celery.beat" for line in lines)
