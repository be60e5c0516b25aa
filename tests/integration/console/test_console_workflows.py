"""The console's Workflows pages in a real headless Chromium: a failed run is listed, its page
shows each step with the job rows it ran as (linked to their job pages), and Retry runs it
again from where it stopped; another tenant's run is not found."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import BrowserContext, expect

from asanoha import StepContext, WorkflowFailedError
from asanoha.handlers import job_admin, workflow_admin
from asanoha.platform.model import Feature, SessionUser
from tests.integration.console.test_console_operations import console_page

ACME = SessionUser.of("acme-1", "acme", ["SystemAdmin"])
GLOBEX = SessionUser.of("globex-1", "globex", ["SystemAdmin"])


def report_feature(broken: set[int]) -> Feature:
    shop = Feature("shop")
    report = shop.workflow("report", manual=True)

    @report.step("fetch")
    def fetch(payload: dict[str, Any], ctx: StepContext) -> list[int]:
        return [1, 2, 3]

    @report.step("score", after="fetch", map=lambda ctx: ctx.results["fetch"], retries=0)
    def score(item: int, ctx: StepContext) -> int:
        if item in broken:
            raise RuntimeError(f"cannot score {item}")
        return item

    @report.step("total", after="score")
    def total(payload: dict[str, Any], ctx: StepContext) -> int:
        return sum(ctx.results["score"])

    return shop


@pytest.mark.parametrize("database", ["postgres"])
def test_an_administrator_finds_a_failed_run_and_retries_it_from_its_page(
    asanoha_stack: Any, browser: BrowserContext, database: str
) -> None:
    broken = {2}
    stack = asanoha_stack(
        features=[report_feature(broken), job_admin.feature, workflow_admin.feature],
        jobs=True,
        database=database,
    )
    run_id = stack.app.workflows.start("shop:workflow:report", {}, ACME)
    with pytest.raises(WorkflowFailedError):
        stack.drain()

    with console_page(stack, browser, ACME) as page:
        page.click("nav a[href$='/workflows']")
        row = page.locator(f"#runs tr[data-run='{run_id}']")
        expect(row).to_contain_text("failed")
        expect(row).to_contain_text("cannot score 2")
        row.locator("a").click()
        expect(page.locator("#run-state")).to_have_text("failed")
        score = page.locator("#steps tr[data-step='score']")
        expect(score).to_contain_text("failed")
        # Each item links to the job page of the row it ran as.
        expect(score.locator("a.item")).to_have_count(3)
        score.locator("a.item").nth(1).click()
        expect(page.locator("#job-state")).to_have_text("failed")
        page.go_back()

        broken.clear()
        page.click("#retry")
        expect(page.locator("p.notice")).to_contain_text("runs again")
        stack.drain()
        page.reload()
        expect(page.locator("#run-state")).to_have_text("succeeded")
        expect(page.locator("#steps tr[data-step='total']")).to_contain_text("succeeded")
    assert stack.app.workflows.get(run_id).result == 6

    browser.clear_cookies()
    with console_page(stack, browser, GLOBEX) as other:
        other.goto(other.url.replace("/jobs", f"/workflows/{run_id}"))
        expect(other.locator("main")).to_contain_text("has no workflow run")
        other.goto(other.url.replace(f"/workflows/{run_id}", "/workflows"))
        expect(other.locator("#runs")).to_contain_text("No runs.")


@pytest.mark.parametrize("database", ["postgres"])
def test_an_administrator_approves_the_step_a_run_waits_at_from_its_page(
    asanoha_stack: Any, browser: BrowserContext, database: str
) -> None:
    shop = Feature("shop")
    release = shop.workflow("release", manual=True)
    release.approval("go")

    @release.step("ship", after="go")
    def ship(payload: dict[str, Any], ctx: StepContext) -> str:
        return "shipped after " + ctx.results["go"]["approved_by"]

    stack = asanoha_stack(
        features=[shop, job_admin.feature, workflow_admin.feature], jobs=True, database=database
    )
    run_id = stack.app.workflows.start("shop:workflow:release", {}, ACME)
    stack.drain()
    with console_page(stack, browser, ACME) as page:
        page.goto(page.url.replace("/console/jobs", f"/console/workflows/{run_id}"))
        expect(page.locator("#steps tr[data-step='go']")).to_contain_text("running")
        page.click("#approve-go")
        expect(page.locator("p.notice")).to_contain_text("approved")
        stack.drain()
        page.reload()
        expect(page.locator("#run-state")).to_have_text("succeeded")
    assert stack.app.workflows.get(run_id).result == "shipped after acme-1"
