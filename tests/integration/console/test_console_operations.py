"""The operator console in a real headless Chromium against the application served by uvicorn:
the operator tenant sees a cron job that failed (it ran as the default tenant) and retries it,
a requeue is shown as waiting and only the failure in red; a job is paused and resumed from
the page and its rows follow; a partitioned consumer shows each partition."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from playwright.sync_api import BrowserContext, Page, expect
from sqlalchemy import select

from asanoha import Access, Entity, Feature, JobContext, fields
from asanoha.console import mount_console
from asanoha.handlers import consumer_admin, job_admin
from asanoha.platform.consumers import ConsumerContext
from asanoha.platform.http import issue_token
from asanoha.platform.model import SessionUser
from asanoha.platform.store import StoredEvent
from asanoha.testing import TestUsers
from asanoha.testing.serving import serve_in_thread
from asanoha.workers import JobFailedError
from asanoha.workers.beat import CRON_TASK_NAME
from asanoha.workers.lanes import queue_name

OPERATOR_TENANT = "ops"
OPERATOR = SessionUser.of("ops-1", OPERATOR_TENANT, ["SystemAdmin"])
NIGHTLY, TIDY = "clock:job:nightly", "clock:job:tidy"
NOTE_CREATE, TALLY = "clock:write:note:create", "clock:consumer:tally"
PARTITIONS = 3
#: The console's colours (console.css): the error colour, and the failure tone's background.
ERROR_RED, FAILURE_BACKGROUND = "rgb(192, 57, 43)", "rgb(250, 219, 215)"


class Clock:
    """What the jobs did: whether the nightly job fails, and the runs of ``tidy``."""

    def __init__(self) -> None:
        self.failing = True
        self.tidied: list[int] = []


def clock_feature(clock: Clock) -> Feature:
    """A nightly cron job that fails while told to, a manual ``tidy`` job, and notes followed by
    a consumer with three partitions."""
    feature = Feature("clock")

    @feature.job("nightly", cron="30 2 * * *")
    def nightly(payload: dict[str, Any], ctx: JobContext) -> None:
        if clock.failing:
            raise ConnectionError("the mail server did not answer")

    @feature.job("tidy", manual=True)
    def tidy(payload: dict[str, Any], ctx: JobContext) -> None:
        clock.tidied.append(payload["n"])

    note = Entity(
        table="clock_notes", fields={"text": fields.text(personal=False, reason="fixture")}
    )
    feature.crud("note", note, write=Access(roles=["Admin"]), read=Access(roles=["Admin"]))

    def tally(event: StoredEvent, ctx: ConsumerContext) -> None:
        pass

    feature.consumer("tally", on=["clock:event:note.created"], partitions=PARTITIONS)(tally)
    return feature


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def stack(asanoha_stack: Any, clock: Clock) -> Any:
    return asanoha_stack(
        features=[clock_feature(clock), job_admin.feature, consumer_admin.feature],
        jobs=True,
        settings={"operator_tenant": OPERATOR_TENANT},
    )


@contextmanager
def console_page(stack: Any, browser: BrowserContext, user: SessionUser) -> Iterator[Page]:
    """A page of the served console, signed in as ``user`` through the login form."""
    with serve_in_thread(mount_console(stack.app.build_http(), stack.app)) as base:
        page = browser.new_page()
        page.goto(f"{base}/console/login")
        page.fill("#token", issue_token(stack.app.settings, user))
        page.click("form[action$='/login'] button[type=submit]")
        page.wait_for_url(f"{base}/console/jobs")
        yield page


def job_row(stack: Any, qn: str) -> Any:
    outbox = stack.tables.outbox
    with stack.db.connect() as conn:
        return conn.execute(
            select(outbox.c.state, outbox.c.published_at).where(outbox.c.job_qn == qn)
        ).one()


def colour(page: Page, selector: str, prop: str) -> str:
    return str(page.locator(selector).evaluate(f"e => getComputedStyle(e).{prop}"))


def test_the_operator_tenant_retries_a_failed_cron_job_and_the_requeue_is_not_red(
    stack: Any, clock: Clock, browser: BrowserContext
) -> None:
    queue = queue_name(stack.app.settings.queue_prefix, "worker")
    stack.app.celery.send_task(CRON_TASK_NAME, args=[NIGHTLY], queue=queue)
    with pytest.raises(JobFailedError, match="mail server did not answer"):
        stack.drain()

    with console_page(stack, browser, OPERATOR) as page:
        expect(page.locator("#tenant")).to_have_text(OPERATOR_TENANT)
        page.goto(page.url + "?state=failed")
        [failed] = page.locator("#job-rows tbody tr").all()
        # The cron job ran as the default tenant; the operator tenant sees it all the same.
        expect(failed.locator("td").nth(1)).to_have_text(NIGHTLY)
        expect(failed.locator("td").nth(2)).to_have_text(stack.app.settings.default_tenant)
        expect(failed.locator(".error-text")).to_contain_text("mail server did not answer")
        failed.locator("a").click()
        expect(page.locator("#job-state")).to_have_text("failed")

        clock.failing = False
        page.click("#retry")
        expect(page.locator(".notice")).to_have_text("The job was put back to pending.")
        stack.drain()
        page.reload()
        expect(page.locator("#job-state")).to_have_text("succeeded")
        expect(page.locator("#attempts .outcome")).to_have_text(["failed", "requeued", "succeeded"])
        # Only the failure is red: the requeue is a waiting state, its note not an error.
        failed_run, requeued_run = (
            "#attempts tbody tr:nth-child(1)",
            "#attempts tbody tr:nth-child(2)",
        )
        assert colour(page, f"{failed_run} .outcome", "backgroundColor") == FAILURE_BACKGROUND
        assert colour(page, f"{failed_run} td:last-child", "color") == ERROR_RED
        expect(page.locator(f"{requeued_run} td:last-child")).to_have_text("requeued by ops-1")
        assert colour(page, f"{requeued_run} .outcome", "backgroundColor") != FAILURE_BACKGROUND
        assert colour(page, f"{requeued_run} td:last-child", "color") != ERROR_RED
    assert job_row(stack, NIGHTLY).state == "succeeded"


def test_a_job_paused_from_the_page_keeps_its_rows_unpublished_until_resumed(
    stack: Any, clock: Clock, browser: BrowserContext
) -> None:
    with console_page(stack, browser, OPERATOR) as page:
        tidy = page.locator(f'#pauses tr[data-target="{TIDY}"]')
        expect(tidy.locator(".pause-state")).to_have_text("active")
        tidy.locator("button.pause").click()
        expect(page.locator(".notice")).to_contain_text("Paused")
        assert [pause.target for pause in stack.app.jobs.pauses()] == [TIDY]
        expect(tidy.locator(".pause-state")).to_have_text("paused")
        expect(tidy.locator("td").nth(4)).to_have_text(OPERATOR.id)

        # Enqueued while paused: no worker runs it, and its row waits unpublished.
        page.select_option("form.run select[name=job]", TIDY)
        page.fill("form.run input[name=payload]", '{"n": 1}')
        page.click("form.run button")
        expect(page.locator(".notice")).to_have_text("The job was enqueued.")
        expect(page.locator("#job-paused")).to_contain_text(f"paused by {TIDY}")
        assert stack.drain().paused == {TIDY: 1}
        assert clock.tidied == []
        row = job_row(stack, TIDY)
        assert (row.state, row.published_at) == ("pending", None)

        page.click("#resume")
        expect(page.locator(".notice")).to_contain_text("Resumed")
        expect(page.locator("#job-paused")).to_have_text("no")
        assert stack.app.jobs.pauses() == []
        stack.drain()
        page.reload()
        expect(page.locator("#job-state")).to_have_text("succeeded")
    assert clock.tidied == [1]
    row = job_row(stack, TIDY)
    assert row.state == "succeeded" and row.published_at is not None


def test_a_lane_paused_from_the_page_holds_its_jobs(stack: Any, browser: BrowserContext) -> None:
    with console_page(stack, browser, OPERATOR) as page:
        page.locator('#pauses tr[data-target="lane:worker"] button.pause').click()
        expect(page.locator(".notice")).to_contain_text("Paused")
        assert [pause.target for pause in stack.app.jobs.pauses()] == ["lane:worker"]
        tidy = page.locator(f'#pauses tr[data-target="{TIDY}"]')
        expect(tidy.locator(".pause-state")).to_have_text("paused")
        expect(tidy.locator(".paused-by")).to_have_text("by lane:worker")
        # Held by its lane: resuming the lane, not the job, lets it run.
        expect(tidy.locator("button")).to_have_count(0)
        page.locator('#pauses tr[data-target="lane:worker"] button.resume').click()
        expect(page.locator(".notice")).to_contain_text("Resumed")
        expect(tidy.locator(".pause-state")).to_have_text("active")
    assert stack.app.jobs.pauses() == []


def test_the_consumers_page_shows_each_partition_and_pauses_one(
    asanoha_stack: Any, clock: Clock, browser: BrowserContext
) -> None:
    # No worker: the partitions stay where the test moves them.
    stack = asanoha_stack(
        features=[clock_feature(clock), job_admin.feature, consumer_admin.feature],
        settings={"operator_tenant": OPERATOR_TENANT},
    )
    for n in range(12):
        stack.http.write_ok(NOTE_CREATE, {"text": f"note {n}"}, TestUsers.admin)
    stack.consumers.run_partition(TALLY, 0)
    [status] = [found for found in stack.consumers.status() if found.name == TALLY]
    assert status.partitions[0].lag == 0 and status.lag > 0

    with console_page(stack, browser, OPERATOR) as page:
        page.goto(page.url.replace("/jobs", "/consumers"))
        rows = page.locator(f'tr.partition[data-consumer="{TALLY}"]')
        expect(rows).to_have_count(PARTITIONS)
        for part in status.partitions:
            row = page.locator(f'tr.partition[data-partition="{part.partition}"]')
            expect(row.locator(".position")).to_have_text(str(part.position))
            expect(row.locator(".lag")).to_have_text(str(part.lag))
            expect(row.locator(".state")).to_have_text("idle")
        summed = page.locator(f'tr[data-consumer="{TALLY}"]:not(.partition)')
        expect(summed.locator(".lag")).to_have_text(str(status.lag))

        second = page.locator('tr.partition[data-partition="2"]')
        second.locator("button", has_text="Disable").click()
        expect(page.locator(".notice")).to_have_text("The consumer was disabled.")
        [status] = [found for found in stack.consumers.status() if found.name == TALLY]
        assert [part.status for part in status.partitions] == ["idle", "idle", "disabled"]
        expect(second.locator(".state")).to_have_text("disabled")
        expect(summed.locator(".paused-by")).to_have_text(f"1 of {PARTITIONS} disabled")

        second.locator("button", has_text="Enable").click()
        expect(page.locator(".notice")).to_have_text("The consumer was enabled.")
        expect(second.locator(".state")).to_have_text("idle")
    [status] = [found for found in stack.consumers.status() if found.name == TALLY]
    assert {part.status for part in status.partitions} == {"idle"}
