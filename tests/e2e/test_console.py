"""The operator console in a real browser (Debian's Chromium driven by Playwright) against
``asanoha serve`` and ``asanoha worker`` processes on Postgres and a private Redis: a
SystemAdmin signs in with a token, sees a failed job with its error and log lines, retries it
and sees it succeed, restarts a dead consumer and sees its lag fall to 0; another tenant's
SystemAdmin sees none of it; without a session a page redirects to the login, and a POST
without the CSRF token is refused with 403.

The screenshots it takes are the documentation site's (``docs/console/``)."""

from __future__ import annotations

import re
import secrets
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import BrowserContext, Page
from sqlalchemy import select

from asanoha.app import App
from asanoha.platform.http import issue_token
from asanoha.platform.model import SessionUser
from asanoha.platform.settings import Settings
from asanoha.testing.databases import TestDatabase
from asanoha.testing.serving import free_port
from tests.e2e.conftest import ROOT, STEP_TIMEOUT, stop_processes, worker_environment
from tests.e2e.console_app import feature
from tests.private_redis import PrivateRedis

pytestmark = pytest.mark.e2e

APP = "tests.e2e.console_app:app"
WRITE = "desk:write:note:create"
SEND, FOLLOW = "desk:job:send", "desk:consumer:follow"
TENANT, OTHER_TENANT = "acme", "globex"
WRITER = SessionUser.of("clerk-1", TENANT, ["Admin"])
ADMIN = SessionUser.of("ops-acme", TENANT, ["SystemAdmin"])
OTHER_ADMIN = SessionUser.of("ops-globex", OTHER_TENANT, ["SystemAdmin"])
#: Where the documentation site's screenshots go.
SHOTS = ROOT / "docs" / "console"
#: Seconds the API and the worker may take to start (each imports the application).
START_TIMEOUT = 120


@dataclass
class Desk:
    """The running fleet: the API's URL, this process's view of the app, the flag files."""

    url: str
    app: App
    fail_flag: Path
    poison_flag: Path
    processes: list[subprocess.Popen[bytes]]
    logs: Path

    def token(self, user: SessionUser) -> str:
        return issue_token(self.app.settings, user)

    def write_note(self, text: str) -> None:
        answer = httpx.post(
            f"{self.url}/api/write/{WRITE}",
            json={"text": text},
            headers={"Authorization": f"Bearer {self.token(WRITER)}"},
            timeout=STEP_TIMEOUT,
        )
        assert answer.status_code == 200, answer.text

    def job_state(self) -> str | None:
        outbox = self.app.service.tables.outbox
        with self.app.database.connect() as conn:
            return conn.execute(select(outbox.c.state).where(outbox.c.job_qn == SEND)).scalar()

    def consumer(self) -> Any:
        [status] = [found for found in self.app.consumers.status() if found.name == FOLLOW]
        return status

    def output(self) -> str:
        return "\n".join(
            f"--- {log.name}:\n{log.read_text(errors='replace')[-3000:]}"
            for log in sorted(self.logs.glob("*.log"))
        )


@pytest.fixture
def desk(private_redis: PrivateRedis, tmp_path: Path) -> Iterator[Desk]:
    suffix = secrets.token_hex(6)
    database = TestDatabase.create("postgres", f"asanoha_e2e_console_{suffix}")
    secret = secrets.token_urlsafe(32)
    settings = Settings(
        database_url=database.url,
        broker_url=private_redis.url,
        queue_prefix=f"asanoha-console-{suffix}",
        visibility_timeout=60,
        job_timeout=20,
        jwt_secret=secret,
        operator_tenant=TENANT,
    )
    fail_flag, poison_flag = tmp_path / "fail", tmp_path / "poison"
    env = worker_environment(
        settings,
        ASANOHA_JWT_SECRET=secret,
        ASANOHA_OPERATOR_TENANT=TENANT,
        DESK_FAIL_FLAG=str(fail_flag),
        DESK_POISON_FLAG=str(poison_flag),
    )
    app = App([feature], settings)
    port = free_port()
    command = [sys.executable, "-m", "asanoha.cli"]
    processes: list[subprocess.Popen[bytes]] = []
    logs: list[Any] = []
    try:
        migrated = subprocess.run(
            [*command, "migrate", "--app", APP],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=START_TIMEOUT,
        )
        assert migrated.returncode == 0, migrated.stderr
        for name, arguments in (
            ("api", ["serve", "--app", APP, "--port", str(port)]),
            ("worker", ["worker", "--app", APP, "--concurrency", "1"]),
        ):
            log = (tmp_path / f"{name}.log").open("wb")
            logs.append(log)
            processes.append(
                subprocess.Popen(
                    [*command, *arguments], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
                )
            )
        running = Desk(f"http://127.0.0.1:{port}", app, fail_flag, poison_flag, processes, tmp_path)
        wait_until(lambda: _healthy(running.url), "the API answers /health", running, START_TIMEOUT)
        yield running
    finally:
        stop_processes(processes)
        for log in logs:
            log.close()
        app.close()
        database.drop()


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health", timeout=5).status_code == 200
    except httpx.TransportError:
        return False


def wait_until(
    check: Callable[[], Any], what: str, desk: Desk, within: float = STEP_TIMEOUT
) -> Any:
    """Poll ``check`` until it returns something true: the work happens in other processes."""
    deadline = time.monotonic() + within
    while True:
        found = check()
        if found:
            return found
        exited = [process.returncode for process in desk.processes if process.poll() is not None]
        if exited:
            raise AssertionError(f"a process exited ({exited}) before: {what}\n{desk.output()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {within:g} s: {what}\n{desk.output()}")
        time.sleep(0.25)


def reload_until(page: Page, desk: Desk, check: Callable[[Page], bool], what: str) -> None:
    """Reload ``page`` until ``check`` holds for what it shows."""

    def shown() -> bool:
        page.reload()
        return check(page)

    wait_until(shown, what, desk)


def sign_in(page: Page, desk: Desk, user: SessionUser) -> None:
    page.goto(f"{desk.url}/console/login")
    page.fill("#token", desk.token(user))
    page.click("button:has-text('Sign in')")
    page.wait_for_url(f"{desk.url}/console/jobs")


def shoot(page: Page, name: str) -> None:
    """Save what the page shows as a screenshot of the documentation site."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def test_an_operator_retries_a_failed_job_and_restarts_a_dead_consumer_in_the_console(
    desk: Desk, browser: BrowserContext
) -> None:
    page = browser.new_page()
    page.set_viewport_size({"width": 1100, "height": 640})
    script_errors: list[str] = []
    page.on("pageerror", lambda error: script_errors.append(str(error)))

    # No session: the login page.
    page.goto(f"{desk.url}/console/jobs")
    assert page.url == f"{desk.url}/console/login"
    shoot(page, "login")

    desk.fail_flag.touch()
    desk.write_note("hello")
    wait_until(lambda: desk.job_state() == "failed", "the job fails for good", desk)

    sign_in(page, desk, ADMIN)
    rows = page.locator("#job-rows tbody tr")
    assert rows.count() == 1
    assert "failed" in rows.first.inner_text()
    assert "the mail server did not answer" in rows.first.inner_text()
    shoot(page, "jobs")

    page.click(f"#job-rows a:has-text('{SEND}')")
    page.wait_for_selector("#attempts")
    job_url = page.url
    attempts = page.locator("#attempts").inner_text()
    assert "the mail server did not answer" in attempts
    assert "sending note hello to the mail server" in attempts
    shoot(page, "job")

    # A POST without the session's CSRF token is refused, and changes nothing.
    refused = page.request.post(f"{job_url}/retry", form={})
    assert refused.status == 403
    assert desk.job_state() == "failed"

    desk.fail_flag.unlink()
    page.click("#retry")
    page.wait_for_selector(".notice")
    assert "put back to pending" in page.locator(".notice").inner_text()
    reload_until(
        page,
        desk,
        lambda shown: shown.locator("#job-state").inner_text() == "succeeded",
        "the retried job shows succeeded",
    )
    assert "succeeded" in page.locator("#attempts").inner_text()

    # A poisoned note kills the consumer (one attempt); a restart lets it through.
    desk.poison_flag.touch()
    desk.write_note("poison")
    wait_until(lambda: desk.consumer().status == "dead", "the consumer dies", desk)
    page.goto(f"{desk.url}/console/consumers")
    row = page.locator(f"tr[data-consumer='{FOLLOW}']")
    assert "dead" in row.inner_text()
    assert "cannot follow a poisoned note" in row.inner_text()
    assert row.locator("td.lag").inner_text() == "1"
    shoot(page, "consumers")

    desk.poison_flag.unlink()
    row.locator("button:has-text('Restart')").click()
    page.wait_for_selector(".notice")
    reload_until(
        page,
        desk,
        lambda shown: (
            shown.locator(f"tr[data-consumer='{FOLLOW}'] td.lag").inner_text() == "0"
            and "idle" in shown.locator(f"tr[data-consumer='{FOLLOW}']").inner_text()
        ),
        "the restarted consumer's lag falls to 0",
    )

    # A write its caller may not make: counted as denied, by reason.
    denied = httpx.post(
        f"{desk.url}/api/write/{WRITE}",
        json={"text": "no"},
        headers={"Authorization": f"Bearer {desk.token(OTHER_ADMIN)}"},
        timeout=STEP_TIMEOUT,
    )
    assert denied.status_code == 403
    page.goto(f"{desk.url}/console/writes")
    assert WRITE in page.locator("#writes").inner_text()
    assert "role_required" in page.locator("#refusals").inner_text()
    shoot(page, "writes")

    # Another tenant's SystemAdmin sees none of it.
    page.click("button:has-text('Sign out')")
    page.wait_for_url(f"{desk.url}/console/login?notice=signed-out")
    sign_in(page, desk, OTHER_ADMIN)
    assert page.locator("#tenant").inner_text() == OTHER_TENANT
    assert page.locator("#job-rows tbody tr").inner_text() == "No job rows match."
    assert "mail server" not in page.content()
    assert page.goto(job_url).status == 404  # type: ignore[union-attr]
    page.goto(f"{desk.url}/console/consumers")
    other_row = page.locator(f"tr[data-consumer='{FOLLOW}']").inner_text()
    assert "poisoned" not in other_row
    assert not re.search(r"Restart|Skip|Disable", other_row)
    page.goto(f"{desk.url}/console/writes")
    assert "operator tenant only" in page.locator("main").inner_text()
    assert script_errors == []
