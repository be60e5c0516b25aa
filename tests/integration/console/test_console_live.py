"""The console's live pages: a real headless Chromium keeps the Jobs page open while a job
runs and reports progress, and the page shows the new states without navigating; without
JavaScript the same pages are plain HTML; the console's live route (``/console/live``)
sends a principal only the job events of its own tenant, as the feed would."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from playwright.sync_api import BrowserContext, Page, expect

from asanoha import Feature, JobContext
from asanoha.console import mount_console
from asanoha.handlers import job_admin
from asanoha.platform.http import issue_token
from asanoha.platform.http.stream import feed_of
from asanoha.platform.model import SessionUser
from asanoha.platform.service.platform_events import append_job_progress
from asanoha.testing import TestUsers
from asanoha.testing.serving import serve_in_thread
from tests.browser import chromium_context
from tests.integration.feed.sse_client import SseStream

#: A system administrator of tenant A (the console's role), and one of tenant B.
OPERATOR = TestUsers.system_admin
OTHER = SessionUser.of("system-admin-b", TestUsers.other_tenant.tenant_id, ["SystemAdmin"])
WORK = "live:job:work"
#: How long a job waits for the test to let it end (the test lets it go far sooner).
GATE_SECONDS = 60


class Gate:
    """Holds the ``work`` job after its progress report until the test opens it."""

    def __init__(self) -> None:
        self.open = threading.Event()


def live_feature(gate: Gate) -> Feature:
    """A manual job that reports half its progress, then waits for the gate."""
    feature = Feature("live")

    @feature.job("work", manual=True)
    def work(payload: dict[str, Any], ctx: JobContext) -> None:
        ctx.progress(0.5, "half way")
        gate.open.wait(GATE_SECONDS)

    return feature


@pytest.fixture
def gate() -> Gate:
    return Gate()


@pytest.fixture
def stack(asanoha_stack: Any, gate: Gate) -> Any:
    return asanoha_stack(features=[live_feature(gate), job_admin.feature], jobs=True)


@contextmanager
def served_console(stack: Any) -> Iterator[str]:
    """The API with the console on a real port; every live stream is ended before the
    server stops (it waits for open connections)."""
    api = mount_console(stack.app.build_http(), stack.app)
    with serve_in_thread(api) as base:
        try:
            yield base
        finally:
            feed_of(api).close_subscriptions()


def sign_in(page: Page, base: str, stack: Any, user: SessionUser) -> None:
    page.goto(f"{base}/console/login")
    page.fill("#token", issue_token(stack.app.settings, user))
    page.click("form[action$='/login'] button[type=submit]")
    page.wait_for_url(f"{base}/console/jobs")


def row_state(page: Page, job_id: str) -> Any:
    """The state badge of the job row ``job_id`` in the Jobs page's table."""
    row = page.locator("#job-rows tbody tr", has=page.locator(f"a[href$='/jobs/{job_id}']"))
    return row.locator(".state").first


def test_the_jobs_page_shows_a_running_then_finished_job_without_a_reload(
    stack: Any, gate: Gate, browser: BrowserContext
) -> None:
    with served_console(stack) as base:
        page = browser.new_page()
        sign_in(page, base, stack, OPERATOR)
        navigations: list[str] = []
        page.on("framenavigated", lambda frame: navigations.append(frame.url))
        # A value of this document: a navigation (a reload too) would lose it.
        page.evaluate("window.liveMarker = 'kept'")
        expect(page.locator("#live")).to_have_attribute("data-state", "live")
        expect(page.locator("#live")).to_be_visible()
        page.fill("input[name=payload]", '{"typed": true}')

        first = stack.dispatch_job(WORK, {}, OPERATOR)
        runner = threading.Thread(target=stack.drain, kwargs={"timeout": GATE_SECONDS})
        runner.start()
        try:
            # The job's progress event reached the page, which reloaded its table: the job
            # is running (it waits for the gate).
            expect(row_state(page, first)).to_have_text("running")
        finally:
            gate.open.set()
            runner.join()
        # Another job's event brings the table up to date: the first one has succeeded.
        second = stack.dispatch_job(WORK, {}, OPERATOR)
        stack.drain()
        expect(row_state(page, first)).to_have_text("succeeded")
        expect(row_state(page, second)).to_be_visible()
        # The counts by state followed the table.
        expect(page.locator("#job-counts")).to_contain_text(WORK)

        assert page.evaluate("window.liveMarker") == "kept"
        assert navigations == []
        # What was typed in a form outside the live regions is still there.
        expect(page.locator("input[name=payload]")).to_have_value('{"typed": true}')
        page.close()


def test_a_job_page_follows_its_own_job(stack: Any, gate: Gate, browser: BrowserContext) -> None:
    with served_console(stack) as base:
        page = browser.new_page()
        sign_in(page, base, stack, OPERATOR)
        job = stack.dispatch_job(WORK, {}, OPERATOR)
        runner = threading.Thread(target=stack.drain, kwargs={"timeout": GATE_SECONDS})
        runner.start()
        try:
            page.goto(f"{base}/console/jobs/{job}")
            expect(page.locator("#live")).to_have_attribute("data-state", "live")
            page.evaluate("window.liveMarker = 'kept'")
            # Held at the gate after its progress report: a running job can be cancelled.
            expect(page.locator("#job-state")).to_have_text("running")
            expect(page.locator("#cancel")).to_be_visible()
        finally:
            gate.open.set()
            runner.join()
        # An event of its own job reloads it (the stream filter is proven by the route's test).
        progress(stack, OPERATOR, job)
        expect(page.locator("#job-state")).to_have_text("succeeded")
        expect(page.locator("#cancel")).to_have_count(0)
        assert page.evaluate("window.liveMarker") == "kept"
        page.close()


def test_without_javascript_the_pages_are_plain_html(stack: Any, gate: Gate) -> None:
    gate.open.set()
    job = stack.dispatch_job(WORK, {}, OPERATOR)
    stack.drain()
    with chromium_context(javascript=False) as browser, served_console(stack) as base:
        page = browser.new_page()
        sign_in(page, base, stack, OPERATOR)
        expect(row_state(page, job)).to_have_text("succeeded")
        # No script ran: the live indicator stays hidden.
        expect(page.locator("#live")).to_be_hidden()
        expect(page.locator("#live")).to_have_attribute("data-state", "connecting")
        # Forms and links work as before.
        page.select_option("select[name=state]", "succeeded")
        page.click("form.filters button[type=submit]")
        page.wait_for_url("**/console/jobs?state=succeeded**")
        expect(row_state(page, job)).to_have_text("succeeded")
        page.locator(f"#job-rows a[href$='/jobs/{job}']").click()
        expect(page.locator("#job-state")).to_have_text("succeeded")
        page.close()


@contextmanager
def live_stream(base: str, stack: Any, user: SessionUser, query: str) -> Iterator[SseStream]:
    """``/console/live`` as a browser of ``user``'s session opens it (the session cookie)."""
    cookies = {"asanoha_console": issue_token(stack.app.settings, user)}
    with (
        httpx.Client(base_url=base, cookies=cookies, timeout=60) as client,
        client.stream("GET", f"/console/live?{query}") as response,
    ):
        assert response.status_code == 200, response.read()
        stream = SseStream(response=response)
        stream.read_until(lambda s: b"retry:" in s.raw)
        yield stream


def progress(stack: Any, user: SessionUser, job_id: str) -> None:
    service = stack.app.service
    append_job_progress(
        service.database,
        service.tables,
        tenant_id=user.tenant_id,
        job_id=job_id,
        job_qn=WORK,
        owner=user.id,
        fraction=0.5,
    )


def test_the_live_route_sends_only_the_sessions_tenants_job_events(stack: Any) -> None:
    ours, theirs, other = (
        "00000000-0000-0000-0000-00000000000a",
        "00000000-0000-0000-0000-00000000000b",
        "00000000-0000-0000-0000-00000000000c",
    )
    with served_console(stack) as base:
        with (
            live_stream(base, stack, OPERATOR, "topic=jobs") as jobs,
            live_stream(base, stack, OPERATOR, f"topic=jobs&job={other}") as one_job,
        ):
            # Committed in this order: a stream sends in id order, so a stream whose first
            # event is a later one passed over the earlier ones.
            progress(stack, OTHER, theirs)
            progress(stack, OPERATOR, ours)
            progress(stack, OPERATOR, other)
            jobs.read_until(lambda s: len(s.events) == 2)
            one_job.read_until(lambda s: len(s.events) == 1)
        assert [m.json["streamId"] for m in jobs.events] == [ours, other]
        assert theirs.encode() not in bytes(jobs.raw)
        assert [m.json["streamId"] for m in one_job.events] == [other]

        # No session, a token without the console's role, an unknown topic: refused.
        assert httpx.get(f"{base}/console/live?topic=jobs").status_code == 401
        lacking = {"asanoha_console": issue_token(stack.app.settings, TestUsers.admin)}
        assert httpx.get(f"{base}/console/live?topic=jobs", cookies=lacking).status_code == 401
        session = {"asanoha_console": issue_token(stack.app.settings, OPERATOR)}
        for query in ("topic=events", "topic=jobs&job=not-an-id", ""):
            refused = httpx.get(f"{base}/console/live?{query}", cookies=session)
            assert refused.status_code == 400, query
