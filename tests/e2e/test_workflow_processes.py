"""Workflow runs on real prefork ``asanoha worker`` processes, Postgres and a private Redis.

- A fan-out of 200 items over two workers, one of them killed with SIGKILL (its whole
  process group) while it runs an item: the run succeeds, its fan-in sees every item's
  result in item order, and the fan-in's body runs exactly once.
- A step that writes a row and then ends its pool process on its first attempt: the
  attempt ends as crashed, the retry runs, and the run succeeds with the row there exactly
  once, the retry's: a step's writes commit with its end, so the first attempt's died with
  its process.
"""

from __future__ import annotations

import datetime as dt
import os
import secrets
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from asanoha.app import App
from asanoha.platform.service.workflow_reads import WorkflowRun
from asanoha.platform.settings import Settings
from asanoha.testing.databases import TestDatabase
from asanoha.workers.lanes import app_queues, delete_queues
from tests.e2e.conftest import ROOT, STEP_TIMEOUT, stop_processes, worker_environment
from tests.e2e.workflow_app import EXIT_ONCE_MARK, FAN_IN_MARK, QUICK_TIMEOUT, feature
from tests.private_redis import PrivateRedis

pytestmark = pytest.mark.e2e

APP = "tests.e2e.workflow_app:app"
#: Items of the fan-out.
ITEMS = 200
#: Items that must have succeeded before the test kills a worker: the fan-out is under way.
DONE_BEFORE_KILL = 20
#: Short, so the killed worker's unacknowledged messages come back within the test; above
#: every step's hard time limit (the worker refuses a step whose limit reaches it), so no
#: live attempt's message comes back while it runs.
VISIBILITY_TIMEOUT = 12
#: Seconds a run may take to finish after the kill: the killed worker's messages come back
#: after the visibility timeout, its running attempts are judged crashed after their hard
#: time limit, and then they run again. Generous: other suites may share the machine.
RUN_DEADLINE = 120

#: The application as this process sees it, and the worker processes a test started.
Flow = tuple[App, list[subprocess.Popen[bytes]]]


@pytest.fixture
def flow(private_redis: PrivateRedis) -> Iterator[Flow]:
    """This process's view of the application (it starts runs and reads them) on a database
    of its own, and the list of worker processes the test starts (stopped at the end)."""
    suffix = secrets.token_hex(6)
    database = TestDatabase.create("postgres", f"asanoha_e2e_{suffix}")
    settings = Settings(
        database_url=database.url,
        broker_url=private_redis.url,
        queue_prefix=f"asanoha-e2e-{suffix}",
        visibility_timeout=VISIBILITY_TIMEOUT,
        job_timeout=QUICK_TIMEOUT,
    )
    app = App([feature], settings)
    workers: list[subprocess.Popen[bytes]] = []
    try:
        app.create_schema()
        yield app, workers
    finally:
        stop_processes(workers)
        delete_queues(app.celery, app_queues(settings))
        app.close()
        database.drop()


def start_worker(
    app: App, role: str, flags: Path, *, concurrency: int = 2
) -> subprocess.Popen[bytes]:
    """``asanoha worker`` as an operator runs it, in a process group of its own (so that
    the test can kill it with its pool processes) and logging to ``flags/<role>.log``."""
    command = [
        sys.executable,
        "-m",
        "asanoha",
        "worker",
        "--app",
        APP,
        "--concurrency",
        str(concurrency),
        "--hostname",
        f"{role}@%h",
    ]
    env = worker_environment(app.settings, E2E_ROLE=role, E2E_FLAG_DIR=str(flags))
    with (flags / f"{role}.log").open("wb") as log:
        return subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=log, stderr=log, start_new_session=True
        )


def wait_until(check: Callable[[], Any], what: str, within: float = STEP_TIMEOUT) -> Any:
    """Poll until ``check()`` is truthy and return it: the work happens in other processes."""
    deadline = time.monotonic() + within
    while not (found := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {within} s: {what}")
        time.sleep(0.05)
    return found


def wait_until_ready(worker: subprocess.Popen[bytes], log: Path) -> None:
    """Wait for the worker's ready line: from then on it takes its share of the queue."""

    def ready() -> bool:
        assert worker.poll() is None, log.read_text(errors="replace")
        return " ready." in log.read_text(errors="replace")

    wait_until(ready, f"{log.name}: the worker is ready")


def wait_until_finished(app: App, run_id: uuid.UUID) -> WorkflowRun:
    """Poll the run until it is no longer running; the run as it ended."""

    def finished() -> WorkflowRun | None:
        run = app.workflows.get(run_id)
        return run if run.state != "running" else None

    found: WorkflowRun = wait_until(finished, f"run {run_id} finishes", within=RUN_DEADLINE)
    return found


def succeeded_items(app: App, run_id: uuid.UUID) -> int:
    square = app.workflows.get(run_id).steps.get("square")
    return 0 if square is None else sum(item.state == "succeeded" for item in square.items)


def marks(app: App, label: str) -> list[Any]:
    """The mark rows labelled ``label``: what the step bodies wrote."""
    table = app.service.tables.entity("flow:mark")
    columns = (table.c.id, table.c.run, table.c.attempt, table.c.created_at)
    with app.database.connect() as conn:
        return list(conn.execute(select(*columns).where(table.c.label == label)).all())


def attempt_history(app: App, job_id: uuid.UUID) -> list[tuple[int, str, dt.datetime]]:
    """The recorded attempts of the job row ``job_id``: number, status and start."""
    runs = app.service.tables.job_runs
    with app.database.connect() as conn:
        rows = conn.execute(
            select(runs.c.attempt, runs.c.status, runs.c.started_at)
            .where(runs.c.task_id == str(job_id))
            .order_by(runs.c.id)
        ).all()
    return [(row.attempt, row.status, row.started_at) for row in rows]


def test_a_fan_in_over_two_workers_one_killed_sees_every_result_once(
    flow: Flow, tmp_path: Path
) -> None:
    app, workers = flow
    victim = start_worker(app, "victim", tmp_path)
    workers.append(victim)
    survivor = start_worker(app, "survivor", tmp_path)
    workers.append(survivor)
    # Both consume before the run starts, so the fan-out is spread over both.
    wait_until_ready(victim, tmp_path / "victim.log")
    wait_until_ready(survivor, tmp_path / "survivor.log")

    run_id = app.workflows.start("flow:workflow:fan", {"n": ITEMS})
    wait_until(
        lambda: succeeded_items(app, run_id) >= DONE_BEFORE_KILL,
        f"{DONE_BEFORE_KILL} items succeeded",
    )
    # The victim now blocks in the next item it starts; once it does, the kill lands while
    # it holds a running attempt (and its prefetched messages).
    (tmp_path / "hold").touch()
    held = wait_until(
        lambda: sorted(int(path.name.rsplit("-", 1)[1]) for path in tmp_path.glob("holding-*")),
        "the victim holds an item",
    )
    os.killpg(victim.pid, signal.SIGKILL)
    victim.wait(timeout=STEP_TIMEOUT)
    assert succeeded_items(app, run_id) < ITEMS  # the fan-out was under way at the kill

    run = wait_until_finished(app, run_id)
    assert run.state == "succeeded", (run.error, run.failed_step, run.failed_item)
    expected = [item * item for item in range(ITEMS)]
    assert run.steps["square"].result == expected
    assert run.steps["total"].result == expected
    assert run.result == expected
    # The fan-in's body ran once: one mark row, written on its first attempt.
    assert [(mark.run, mark.attempt) for mark in marks(app, FAN_IN_MARK)] == [(str(run_id), 1)]
    assert (run.steps["total"].state, run.steps["total"].attempts) == ("succeeded", 1)
    # The attempts the kill cut short count as crashed, and ran again on the survivor.
    square_items = run.steps["square"].items
    assert len(square_items) == ITEMS
    assert all(item.state == "succeeded" for item in square_items)
    for index in held:
        history = [
            (attempt, status)
            for attempt, status, _ in attempt_history(app, square_items[index].job_id)
        ]
        assert history[0] == (1, "crashed"), history
        assert history[-1][1] == "succeeded", history


def test_a_step_that_kills_its_process_after_a_write_leaves_the_row_once_after_its_retry(
    flow: Flow, tmp_path: Path
) -> None:
    app, workers = flow
    workers.append(start_worker(app, "worker", tmp_path, concurrency=1))
    run_id = app.workflows.start("flow:workflow:exit-once", {})

    run = wait_until_finished(app, run_id)
    assert run.state == "succeeded", (run.error, run.failed_step)
    [step_row] = run.steps["write-then-exit"].items
    history = attempt_history(app, step_row.job_id)
    assert [(attempt, status) for attempt, status, _ in history] == [
        (1, "crashed"),
        (2, "succeeded"),
    ]
    # The one row is attempt 2's: attempt 1's write died uncommitted with its process.
    [mark] = marks(app, EXIT_ONCE_MARK)
    assert (mark.run, mark.attempt) == (str(run_id), 2)
    assert run.result == str(mark.id)
