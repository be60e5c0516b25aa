"""Pausing a workflow pauses each of its steps (every step is a job): a run started while
it is paused waits, pending and unpublished, and runs once it is resumed."""

from __future__ import annotations

from typing import Any

import pytest

from asanoha import StepContext
from asanoha.platform.model import Feature


def _chain(ran: list[str]) -> Feature:
    shop = Feature("shop")
    order = shop.workflow("order", manual=True)

    @order.step("fetch")
    def fetch(payload: dict[str, Any], ctx: StepContext) -> int:
        ran.append("fetch")
        return 1

    @order.step("book", after="fetch")
    def book(payload: dict[str, Any], ctx: StepContext) -> int:
        ran.append("book")
        return ctx.results["fetch"] + 1

    return shop


@pytest.mark.parametrize("database", ["postgres", "sqlite"])
def test_a_paused_workflow_holds_its_runs_until_it_is_resumed(
    asanoha_stack: Any, database: str
) -> None:
    ran: list[str] = []
    stack = asanoha_stack(features=[_chain(ran)], jobs=True, database=database)
    paused = stack.app.jobs.pause("shop:workflow:order", paused_by="ops-1")
    assert (paused.target, paused.changed) == ("shop:workflow:order", True)
    assert sorted(pause.target for pause in stack.app.jobs.pauses()) == [
        "shop:workflow:order:book",
        "shop:workflow:order:fetch",
    ]
    run_id = stack.app.workflows.start("shop:workflow:order", {})
    drained = stack.drain()
    assert drained.paused == {"shop:workflow:order:fetch": 1}
    assert ran == []
    assert stack.app.workflows.get(run_id).state == "running"

    resumed = stack.app.jobs.resume("shop:workflow:order")
    assert (resumed.target, resumed.changed, resumed.woken) == ("shop:workflow:order", True, 1)
    stack.drain()
    assert ran == ["fetch", "book"]
    assert stack.app.workflows.get(run_id).result == 2
    assert stack.app.jobs.pauses() == []
