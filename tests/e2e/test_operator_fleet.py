"""The fleet an operator runs, end to end: ``asanoha migrate``, ``serve``, two ``worker``s,
``beat`` and ``flower`` as separate processes on Postgres and a private Redis. A write over
HTTP with a token from ``asanoha token`` runs its jobs (one of them retried), beat ticks a cron
job, Flower shows the tasks under their job names, ``asanoha celery -- inspect`` reaches both
workers, the API and worker metrics count the work, and every process stops cleanly on
SIGTERM."""

from __future__ import annotations

import datetime as dt
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import select

from asanoha.app import App
from asanoha.platform.settings import Settings
from asanoha.testing.databases import TestDatabase
from tests.e2e.conftest import ROOT, STEP_TIMEOUT, worker_environment
from tests.e2e.fleet_app import feature
from tests.private_redis import PrivateRedis

pytestmark = pytest.mark.e2e

APP = "tests.e2e.fleet_app:app"
WRITE = "fleetops:write:order:create"
CONFIRM, FLAKY, TICK = "fleetops:job:confirm", "fleetops:job:flaky", "fleetops:job:tick"
FLOWER_USER = "ops"
#: Seconds five processes (API, two workers, Flower, then beat) may take to start and see each
#: other: each imports the application, and on a loaded machine that alone can take seconds.
#: A bound, not a guess of the machine's speed; the waits return as soon as it is so.
FLEET_START = 180


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class Fleet:
    """The processes of one test: started with their output in files, stopped at the end."""

    folder: Path
    env: dict[str, str]
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    _logs: list[IO[bytes]] = field(default_factory=list)

    def start(self, name: str, command: list[str]) -> subprocess.Popen[bytes]:
        """Start ``command`` (``python -m asanoha.cli ...``) as the process ``name``."""
        log = (self.folder / f"{name}.log").open("wb")
        self._logs.append(log)
        process = subprocess.Popen(
            command, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT
        )
        self.processes[name] = process
        return process

    def run(self, command: list[str]) -> str:
        """Run a one-off ``asanoha`` command; its standard output, or fail with its output."""
        done = subprocess.run(
            command, cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=STEP_TIMEOUT
        )
        assert done.returncode == 0, f"{command[3:]} exited {done.returncode}:\n{done.stderr}"
        return done.stdout

    def logs(self) -> str:
        """The end of every process's output, for a failure message."""
        return "\n".join(
            f"--- {name}:\n{(self.folder / f'{name}.log').read_text(errors='replace')[-3000:]}"
            for name in self.processes
        )

    def stop(self) -> dict[str, int | None]:
        """SIGTERM every process; each one's return code, ``None`` for one still running
        after ``STEP_TIMEOUT`` seconds (then killed)."""
        for process in self.processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        codes: dict[str, int | None] = {}
        for name, process in self.processes.items():
            try:
                codes[name] = process.wait(timeout=STEP_TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                codes[name] = None
        for log in self._logs:
            log.close()
        return codes


@pytest.fixture
def fleet(private_redis: PrivateRedis, tmp_path: Path) -> Iterator[tuple[App, Fleet]]:
    """A fresh database and queue prefix, this process's view of the application (it reads
    the job rows), and the fleet of processes the test starts."""
    suffix = secrets.token_hex(6)
    database = TestDatabase.create("postgres", f"asanoha_e2e_ops_{suffix}")
    settings = Settings(
        database_url=database.url,
        broker_url=private_redis.url,
        queue_prefix=f"asanoha-ops-{suffix}",
        visibility_timeout=60,
        job_timeout=20,
    )
    env = worker_environment(
        settings,
        ASANOHA_JWT_SECRET=secrets.token_urlsafe(32),
        ASANOHA_FLOWER_BASIC_AUTH=f"{FLOWER_USER}:{secrets.token_urlsafe(12)}",
    )
    app = App([feature], settings)
    processes = Fleet(tmp_path, env)
    try:
        yield app, processes
    finally:
        processes.stop()
        app.close()
        database.drop()


def schedule_a_missed_tick(app: App, path: Path, job_qn: str) -> None:
    """Write beat's schedule file as if beat had last ticked ``job_qn`` two minutes ago.

    Beat runs a cron entry it missed as soon as it starts (Celery's default: no
    ``beat_cron_starting_deadline``), so the test does not wait for a minute boundary; the
    finest cron step is a minute.
    """
    from celery.beat import PersistentScheduler

    scheduler = PersistentScheduler(app=app.celery, schedule_filename=str(path))
    try:
        entry = scheduler.schedule[job_qn]
        entry.last_run_at = entry.last_run_at - dt.timedelta(minutes=2)
        scheduler.sync()
    finally:
        scheduler.close()


def wait_until(
    check: Callable[[], Any], what: str, fleet: Fleet, within: float = STEP_TIMEOUT
) -> Any:
    """Poll ``check`` until it returns something true (the work happens in other processes),
    for at most ``within`` seconds."""
    deadline = time.monotonic() + within
    while True:
        try:
            found = check()
        except httpx.TransportError:
            found = None  # not listening yet
        if found:
            return found
        # A process that exited will not make it so: fail now, not at the bound.
        exited = {name: p.returncode for name, p in fleet.processes.items() if p.poll() is not None}
        if exited:
            raise AssertionError(f"exited {exited} before: {what}\n{fleet.logs()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {within:g} s: {what}\n{fleet.logs()}")
        time.sleep(0.2)


def samples(url: str, name: str) -> list[tuple[dict[str, str], float]]:
    """The samples called ``name`` on the Prometheus page at ``url``."""
    text = httpx.get(url, timeout=5).text
    return [
        (sample.labels, sample.value)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    ]


def job_rows(app: App) -> dict[str, list[tuple[str, str]]]:
    """``job QN -> [(row id, state), ...]`` from the outbox."""
    outbox = app.service.tables.outbox
    with app.database.connect() as conn:
        rows = conn.execute(select(outbox.c.job_qn, outbox.c.id, outbox.c.state)).all()
    found: dict[str, list[tuple[str, str]]] = {}
    for job_qn, row_id, state in rows:
        found.setdefault(job_qn, []).append((str(row_id), state))
    return found


def test_an_operator_fleet_runs_traces_and_stops_a_writes_jobs_and_a_cron_job(fleet, tmp_path):
    app, processes = fleet
    env = processes.env
    prefix = app.settings.queue_prefix
    api, flower = f"http://127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}"
    worker_ports = [free_port(), free_port()]
    user, password = env["ASANOHA_FLOWER_BASIC_AUTH"].split(":", 1)
    auth = httpx.BasicAuth(user, password)

    processes.run([sys.executable, "-m", "asanoha.cli", "migrate", "--app", APP])
    schedule = tmp_path / "celerybeat-schedule"
    schedule_a_missed_tick(app, schedule, TICK)

    processes.start(
        "api",
        [sys.executable, "-m", "asanoha.cli", "serve", "--app", APP, "--port", api.rsplit(":")[-1]],
    )
    workers = [
        processes.start(
            f"worker-{n}",
            [
                sys.executable,
                "-m",
                "asanoha.cli",
                "worker",
                "--app",
                APP,
                "--concurrency",
                "1",
                "--metrics-port",
                str(port),
                # A Celery worker option passes through after --.
                *(["--", "--without-mingle"] if n else []),
            ],
        )
        for n, port in enumerate(worker_ports)
    ]
    processes.start(
        "flower",
        [
            sys.executable,
            "-m",
            "asanoha.cli",
            "flower",
            "--app",
            APP,
            "--address",
            "127.0.0.1",
            "--port",
            flower.rsplit(":")[-1],
        ],
    )
    # Default names: <prefix>@<host>-<pid>, distinct for two workers on one host.
    names = [f"{prefix}@{socket.gethostname()}-{worker.pid}" for worker in workers]

    # Flower receives this application's events once it reports both workers online (their
    # heartbeats go to the application's own event exchange).
    def flower_sees_both_workers() -> bool:
        online = samples(f"{flower}/metrics", "flower_worker_online")
        return {labels["worker"] for labels, value in online if value == 1} >= set(names)

    wait_until(flower_sees_both_workers, "Flower sees both workers online", processes, FLEET_START)
    wait_until(
        lambda: httpx.get(f"{api}/health", timeout=5).is_success,
        "the API answers",
        processes,
        FLEET_START,
    )
    # Beat starts last: the tick it runs at once is then in Flower as well.
    processes.start(
        "beat",
        [
            sys.executable,
            "-m",
            "asanoha.cli",
            "beat",
            "--app",
            APP,
            "--schedule",
            str(schedule),
        ],
    )

    token = processes.run(
        [
            sys.executable,
            "-m",
            "asanoha.cli",
            "token",
            "--app",
            APP,
            "--sub",
            "ops-1",
            "--tenant",
            "default",
            "--roles",
            "Admin",
        ]
    ).strip()
    answer = httpx.post(
        f"{api}/api/write/{WRITE}",
        json={"n": 7},
        headers={"Authorization": f"Bearer {token}"},
        timeout=STEP_TIMEOUT,
    )
    assert answer.status_code == 200, answer.text

    # The write's two jobs and the cron job finish: their job rows are the record.
    def all_finished() -> dict[str, list[tuple[str, str]]] | None:
        rows = job_rows(app)
        done = all(
            rows.get(qn) and {state for _, state in rows[qn]} == {"succeeded"}
            for qn in (CONFIRM, FLAKY, TICK)
        )
        return rows if done else None

    # Beat has only just started: its import is part of the wait.
    rows = wait_until(
        all_finished, "both jobs of the write and the cron job succeed", processes, FLEET_START
    )
    runs = app.service.tables.job_runs
    with app.database.connect() as conn:
        flaky_runs = conn.execute(
            select(runs.c.attempt, runs.c.status)
            .where(runs.c.task_id == rows[FLAKY][0][0])
            .order_by(runs.c.attempt)
        ).all()
    assert [attempt for attempt, _ in flaky_runs] == [1, 2]
    assert flaky_runs[-1].status == "succeeded"

    # Flower: every task under its job's name, its id the job row's id, with its states.
    assert httpx.get(f"{flower}/api/tasks", timeout=5).status_code == 401

    def flower_tasks() -> dict[str, dict[str, Any]] | None:
        listed = httpx.get(f"{flower}/api/tasks", auth=auth, timeout=5).json()
        by_id = {task["uuid"]: task for task in listed.values()}
        wanted = [rows[qn][0][0] for qn in (CONFIRM, FLAKY, TICK)]
        if all(by_id.get(task_id, {}).get("state") == "SUCCESS" for task_id in wanted):
            return by_id
        return None

    # Flower's page lags the job rows on a loaded machine: the same generous bound.
    tasks = wait_until(
        flower_tasks, "Flower shows the three tasks succeeded", processes, FLEET_START
    )
    for qn in (CONFIRM, FLAKY, TICK):
        task = tasks[rows[qn][0][0]]
        assert task["name"] == qn
        assert task["received"] and task["started"] and task["succeeded"]
        assert task["worker"] in names
        # The message is a pointer to the job row: no payload reaches Flower.
        assert task["args"] == "()"
        assert task["kwargs"] in ("{'attempt': 1}", "{'attempt': 2}")
    assert tasks[rows[CONFIRM][0][0]]["retried"] is None
    flaky = tasks[rows[FLAKY][0][0]]
    assert flaky["retried"] and flaky["retries"] == 1
    assert "FirstAttemptFails" in flaky["exception"]

    # Celery's own command line reaches both workers, and only this application's tasks.
    pinged = processes.run(
        [
            sys.executable,
            "-m",
            "asanoha.cli",
            "celery",
            "--app",
            APP,
            "--",
            "inspect",
            "ping",
            "--destination",
            ",".join(names),
            "--timeout",
            str(STEP_TIMEOUT),
        ]
    )
    for name in names:
        assert f"{name}: OK" in pinged
    registered = processes.run(
        [sys.executable, "-m", "asanoha.cli", "celery", "--app", APP, "--", "inspect", "registered"]
    )
    assert {CONFIRM, FLAKY, TICK} <= {
        line.strip().removeprefix("* ") for line in registered.splitlines()
    }

    # Metrics: the API counted the write, the workers the attempts, Flower the events.
    writes = samples(f"{api}/metrics", "asanoha_writes_total")
    assert (dict(handler=WRITE, outcome="ok", reason=""), 1.0) in writes
    attempts: dict[tuple[str, str], float] = {}
    for port in worker_ports:
        for labels, value in samples(
            f"http://127.0.0.1:{port}/metrics", "asanoha_job_attempts_total"
        ):
            key = (labels["job"], labels["outcome"])
            attempts[key] = attempts.get(key, 0.0) + value
    assert attempts[(CONFIRM, "succeeded")] == 1
    assert attempts[(FLAKY, "retried")] == 1
    assert attempts[(FLAKY, "succeeded")] == 1
    assert attempts[(TICK, "succeeded")] >= 1
    events = samples(f"{flower}/metrics", "flower_events_total")
    assert any(
        labels["task"] == CONFIRM and labels["type"] == "task-succeeded" and value >= 1
        for labels, value in events
    )

    # SIGTERM: every process shuts down on its own within the bound. Workers, beat and Flower
    # exit 0; uvicorn ends the API by re-raising the SIGTERM it handled once the application
    # has shut down (so -15, 143 in a shell).
    codes = processes.stop()
    assert codes == {name: 0 for name in codes} | {"api": -signal.SIGTERM}, (
        f"{codes}\n{processes.logs()}"
    )
    assert "Application shutdown complete" in (tmp_path / "api.log").read_text()
