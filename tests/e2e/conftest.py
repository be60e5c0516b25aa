"""End-to-end fixtures: a private ``redis-server`` per test (its own port, so no other test's
workers, unacked sweeps or mutexes share it), an application on its own database, and
worker processes started the way an operator starts them."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from asanoha import App, Feature
from asanoha.platform.settings import Settings
from asanoha.testing.databases import TestDatabase

ROOT = Path(__file__).resolve().parents[2]
#: Seconds any single wait of an end-to-end test may take.
STEP_TIMEOUT = 30


@contextmanager
def e2e_app(features: list[Feature], broker_url: str) -> Iterator[App]:
    """This process's view of an application whose workers run as processes: on a Postgres
    database of its own and the given broker, with short timeouts."""
    suffix = secrets.token_hex(6)
    database = TestDatabase.create("postgres", f"asanoha_e2e_{suffix}")
    settings = Settings(
        database_url=database.url,
        broker_url=broker_url,
        queue_prefix=f"asanoha-e2e-{suffix}",
        visibility_timeout=60,
        job_timeout=20,
    )
    app = App(features, settings)
    try:
        app.create_schema()
        yield app
    finally:
        app.close()
        database.drop()


def worker_environment(settings: object, **extra: str) -> dict[str, str]:
    """The environment of a worker process: the test's settings as ``ASANOHA_*``."""
    values = {
        "ASANOHA_DATABASE_URL": settings.database_url,  # type: ignore[attr-defined]
        "ASANOHA_BROKER_URL": settings.broker_url,  # type: ignore[attr-defined]
        "ASANOHA_QUEUE_PREFIX": settings.queue_prefix,  # type: ignore[attr-defined]
        "ASANOHA_VISIBILITY_TIMEOUT": str(settings.visibility_timeout),  # type: ignore[attr-defined]
        "ASANOHA_JOB_TIMEOUT": str(settings.job_timeout),  # type: ignore[attr-defined]
    }
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "src")]),
        **values,
        **extra,
    }


def start_asanoha_worker(
    settings: object, app_reference: str, *, concurrency: int = 2, **extra: str
) -> subprocess.Popen[bytes]:
    """``asanoha worker --app ... --concurrency N``, as an operator runs it."""
    command = [
        sys.executable,
        "-m",
        "asanoha.cli",
        "worker",
        "--app",
        app_reference,
        "--concurrency",
        str(concurrency),
    ]
    return subprocess.Popen(
        command,
        cwd=ROOT,
        env=worker_environment(settings, **extra),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def stop_processes(processes: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM (a warm shutdown), then SIGKILL whatever is still there."""
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for process in processes:
        try:
            process.wait(timeout=STEP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def wait_until(check: Callable[[], object], what: str) -> None:
    """Poll ``check`` (the database: the work happens in other processes) until it holds,
    for at most ``STEP_TIMEOUT`` seconds."""
    deadline = time.monotonic() + STEP_TIMEOUT
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {STEP_TIMEOUT} s: {what}")
        time.sleep(0.1)
