"""``stack.advance_clock(seconds)``: a test moves time for the job rows whose time has not
come (a workflow's sleep, a job's ``delay=``), and the next ``drain()`` runs them; a row
whose time is still ahead after the move stays pending."""

from __future__ import annotations

import time
from typing import Any

import pytest
from sqlalchemy import select

from asanoha import StepContext
from asanoha.platform.model import Feature

DAY = 86400


def _features(ran: list[str]) -> Feature:
    crm = Feature("crm")
    onboard = crm.workflow("onboard", manual=True)

    @onboard.step("send")
    def send(payload: dict[str, Any], ctx: StepContext) -> str:
        ran.append("send")
        return "sent"

    onboard.sleep("cool-off", after="send", seconds=3 * DAY)

    @onboard.step("publish", after="cool-off")
    def publish(payload: dict[str, Any], ctx: StepContext) -> str:
        ran.append("publish")
        return ctx.results["send"]

    @crm.job("remind", manual=True)
    def remind(payload: dict[str, Any], ctx: Any) -> None:
        ran.append("remind")

    return crm


def _states(stack: Any) -> dict[str, str]:
    outbox = stack.tables.outbox
    with stack.db.connect() as conn:
        rows = conn.execute(select(outbox.c.job_qn, outbox.c.state)).all()
    return {row.job_qn: row.state for row in rows}


def _wait_for(stack: Any, job_qn: str) -> None:
    for _ in range(200):
        if job_qn in _states(stack):
            return
        time.sleep(0.05)
    raise AssertionError(f"no row of {job_qn}")


@pytest.mark.parametrize("database", ["postgres", "sqlite"])
def test_advancing_the_clock_wakes_a_sleep_of_three_days(asanoha_stack: Any, database: str) -> None:
    ran: list[str] = []
    stack = asanoha_stack(features=[_features(ran)], jobs=True, database=database)
    run_id = stack.app.workflows.start("crm:workflow:onboard", {})
    _wait_for(stack, "crm:workflow:onboard:cool-off")
    assert stack.advance_clock(DAY) == 1
    # Two days are still ahead: nothing more runs yet.
    time.sleep(0.5)
    assert ran == ["send"]
    assert _states(stack)["crm:workflow:onboard:cool-off"] == "pending"

    assert stack.advance_clock(2 * DAY) == 1
    stack.drain()
    assert ran == ["send", "publish"]
    assert stack.app.workflows.get(run_id).state == "succeeded"


@pytest.mark.parametrize("database", ["sqlite"])
def test_advancing_the_clock_runs_a_delayed_job(asanoha_stack: Any, database: str) -> None:
    ran: list[str] = []
    stack = asanoha_stack(features=[_features(ran)], jobs=True, database=database)
    stack.dispatch_job("crm:job:remind", delay=3600)
    assert stack.advance_clock(3600) == 1
    stack.drain()
    assert ran == ["remind"]
    with pytest.raises(ValueError, match="positive"):
        stack.advance_clock(0)
