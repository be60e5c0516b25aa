"""Job progress from a prefork worker reaches a browser: a page in headless Chromium follows
``/api/stream?types=asanoha:job.*`` with ``EventSource``, its user starts a job that an
``asanoha worker`` process (prefork pool) runs, and the page receives each
``asanoha:job.progress`` of the job (fraction and message, in order, while the job still
runs), then its ``asanoha:job.succeeded``, each once. An operator of another tenant, following
the same feed in a second page, receives none of them; nor does the first page receive any
event of a job that operator starts.

The API is served by uvicorn in this process, the job runs in a pool process of the worker:
what passes between them goes through the database (the feed polls it) and the broker."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import BrowserContext, Page
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from asanoha.platform.model import SessionUser
from asanoha.testing import Stack, TestUsers
from asanoha.testing.users import TENANT_B
from tests.browser import PAGE_TIMEOUT_MS
from tests.e2e.conftest import ROOT, stop_processes, worker_environment
from tests.e2e.progress_app import STEPS, feature, gate
from tests.integration.feed.conftest import Served, serve
from tests.private_redis import PrivateRedis

pytestmark = pytest.mark.e2e

APP = "tests.e2e.progress_app:app"
JOB = "progress:job:report"
PROGRESS, SUCCEEDED = "asanoha:job.progress", "asanoha:job.succeeded"
#: The job's owner: a plain user, who sees the progress of their own jobs only.
OWNER = TestUsers.user
#: An operator of another tenant: sees the progress of every job of their own tenant, so
#: only the tenant keeps the owner's job from them.
STRANGER = SessionUser.of("system-admin-b", TENANT_B, ["Admin", "SystemAdmin"])

FEED_SCRIPT = """
(url) => {
  window.received = [];
  window.opened = 0;
  const source = new EventSource(url);
  source.onopen = () => { window.opened += 1; };
  source.onmessage = (message) => {
    const event = JSON.parse(message.data);
    window.received.push({id: Number(message.lastEventId), stream: event.streamId,
                          type: event.type, payload: event.payload});
  };
  window.source = source;
}
"""


@dataclass
class Fleet:
    """The served API, and the worker process with the file it writes its output to."""

    served: Served
    worker: subprocess.Popen[bytes]
    log: Path

    @property
    def stack(self) -> Stack:
        return self.served.stack

    def open_gate(self, run: str, step: int) -> None:
        """Let the job of ``run`` go on to report step ``step``."""
        gate(run, step).touch()

    def run_job(self, run: str, user: SessionUser) -> str:
        """Start the job as ``user`` (its owner); the worker's relay publishes it."""
        return str(self.stack.app.jobs.run(JOB, {"run": run}, user=user, publish=False))

    def output(self) -> str:
        """Whether the worker still runs, and the end of what it wrote."""
        state = self.worker.poll()
        status = "running" if state is None else f"exited with {state}"
        return f"--- worker ({status}):\n{self.log.read_text(errors='replace')[-4000:]}"


@pytest.fixture
def served(asanoha_stack: Callable[..., Any], private_redis: PrivateRedis) -> Iterator[Served]:
    """The stack (its own database and queue prefix, on a private Redis) served on a real
    port. Without ``jobs=True`` it publishes nothing itself: only the worker runs jobs."""
    stack: Stack = asanoha_stack(features=[feature], settings={"broker_url": private_redis.url})
    yield from serve(stack)


@pytest.fixture
def fleet(served: Served, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Fleet]:
    """``asanoha worker`` with the prefork pool on the served stack's settings."""
    gates = tmp_path / "gates"
    gates.mkdir()
    # The job waits for the gate files by the names this process opens them by.
    monkeypatch.setenv("PROGRESS_GATES", str(gates))
    settings = served.stack.app.settings
    secrets = {"ASANOHA_JWT_SECRET": settings.jwt_secret}
    if settings.master_key is not None:
        secrets["ASANOHA_MASTER_KEY"] = settings.master_key
    env = worker_environment(settings, PROGRESS_GATES=str(gates), **secrets)
    command = [
        *(sys.executable, "-m", "asanoha.cli", "worker", "--app", APP, "--concurrency", "2"),
        # Named, not left to Celery's default: the pool under test.
        *("--", "--pool=prefork"),
    ]
    log = tmp_path / "worker.log"
    with log.open("wb") as output:
        worker = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=output, stderr=subprocess.STDOUT
        )
    try:
        yield Fleet(served, worker, log)
    finally:
        stop_processes([worker])


def follow_jobs(browser: BrowserContext, fleet: Fleet, user: SessionUser) -> Page:
    """A page of the API's origin following the job events ``user`` may see; returned once
    the server has taken the subscription (events committed from then on reach it)."""
    page = browser.new_page()
    page.goto(f"{fleet.served.base_url}/health")
    token = fleet.served.token(user)
    # A browser's EventSource cannot send headers: the token goes in the query.
    page.evaluate(FEED_SCRIPT, f"/api/stream?types=asanoha:job.*&access_token={token}")
    wait_for(page, fleet, "() => window.opened === 1", "the feed opens")
    return page


def wait_for(page: Page, fleet: Fleet, condition: str, what: str) -> None:
    """Wait until ``condition`` holds in ``page``; fail saying what did not happen, what the
    page had received and what the worker wrote."""
    try:
        page.wait_for_function(condition, timeout=PAGE_TIMEOUT_MS)
    except PlaywrightTimeoutError:
        received = page.evaluate("() => window.received")
        raise AssertionError(
            f"not within {PAGE_TIMEOUT_MS / 1000:g} s: {what}\n"
            f"the page received: {received}\n{fleet.output()}"
        ) from None


def wait_for_events(page: Page, fleet: Fleet, job_id: str, count: int, what: str) -> None:
    """Wait until ``page`` holds ``count`` events of the job ``job_id``."""
    condition = f"() => window.received.filter((e) => e.stream === {job_id!r}).length >= {count}"
    wait_for(page, fleet, condition, what)


def events_of(page: Page, job_id: str) -> list[tuple[str, dict[str, Any]]]:
    """The (type, payload) of each event of ``job_id`` the page received, in arrival order."""
    received: list[dict[str, Any]] = page.evaluate("() => window.received")
    return [(event["type"], event["payload"]) for event in received if event["stream"] == job_id]


def expected_events() -> list[tuple[str, dict[str, Any]]]:
    """What the job's owner receives of one run: each step's progress, then its end."""
    return [
        (PROGRESS, {"job": JOB, "fraction": fraction, "message": message})
        for fraction, message in STEPS
    ] + [(SUCCEEDED, {"job": JOB, "attempt": 1, "status": "succeeded"})]


def run_ungated(page: Page, fleet: Fleet, run: str, user: SessionUser) -> str:
    """Run the job as ``user`` with its gates open, until ``page`` has its end."""
    for step in range(1, len(STEPS)):
        fleet.open_gate(run, step)
    job_id = fleet.run_job(run, user)
    wait_for_events(page, fleet, job_id, len(STEPS) + 1, f"the end of the {run} job")
    return job_id


def test_progress_from_a_prefork_worker_reaches_its_owners_browser_only(
    fleet: Fleet, browser: BrowserContext
) -> None:
    owner = follow_jobs(browser, fleet, OWNER)
    stranger = follow_jobs(browser, fleet, STRANGER)

    job_id = fleet.run_job("owner", OWNER)
    # Each report but the last is followed by a gate: it reaches the page while the job
    # waits there, so the page shows the progress as the job runs, not when it has ended.
    for step in range(1, len(STEPS)):
        wait_for_events(owner, fleet, job_id, step, f"progress {STEPS[step - 1]}")
        assert events_of(owner, job_id) == expected_events()[:step]
        fleet.open_gate("owner", step)
    wait_for_events(owner, fleet, job_id, len(STEPS) + 1, "the job's end")
    assert events_of(owner, job_id) == expected_events()

    # The feed sends in id order: once the stranger's page has the end of a job of its own,
    # started after the owner's ended, it has passed every event of the owner's job.
    strangers_job = run_ungated(stranger, fleet, "stranger", STRANGER)
    assert events_of(stranger, job_id) == []
    assert events_of(stranger, strangers_job) == expected_events()
    # Likewise the owner's page, past a second job of the owner: nothing of the stranger's
    # job, and each event of the first job still once.
    second_job = run_ungated(owner, fleet, "again", OWNER)
    assert events_of(owner, strangers_job) == []
    assert events_of(owner, job_id) == expected_events()
    assert events_of(owner, second_job) == expected_events()
    ids = [event["id"] for event in owner.evaluate("() => window.received")]
    assert ids == sorted(set(ids))
    for page in (owner, stranger):
        page.evaluate("() => window.source.close()")
