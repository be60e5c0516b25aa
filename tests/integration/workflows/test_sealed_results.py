"""A step's result holding personal values it was given is stored sealed, like job payloads."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from asanoha import StepContext
from asanoha.platform.model import Feature
from asanoha.platform.personal import FORGOTTEN
from asanoha.platform.service.erasure import forget_subject
from asanoha.testing import TestUsers
from tests.integration.personal.features import personal
from tests.integration.personal.scan import hits
from tests.integration.personal.test_forget import ALICE

SEEN: list[Any] = []

greet = Feature("greet")
welcome = greet.workflow("welcome", on="personal:write:customer:create")


@welcome.step("address")
def address(payload: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
    return {"to": payload["email"], "plan": payload["plan"]}


@welcome.step("send", after="address")
def send(payload: dict[str, Any], ctx: StepContext) -> str:
    SEEN.append(ctx.results["address"]["to"])
    return "sent"


@pytest.mark.parametrize("database", ["postgres", "sqlite"])
def test_a_steps_result_is_stored_sealed_and_read_opened(asanoha_stack, database):
    SEEN.clear()
    stack = asanoha_stack(features=[personal, greet], jobs=True, database=database)
    created = stack.http.write_ok(
        "personal:write:customer:create",
        {"email": ALICE["email"], "name": ALICE["name"], "plan": "p"},
        TestUsers.admin,
    )
    stack.drain()
    assert [ALICE["email"]] == SEEN
    # Neither the run's payload nor the step's result holds the e-mail in plain text.
    assert hits(stack, [ALICE["email"]]) == []
    runs = stack.tables.workflow_runs
    with stack.db.connect() as conn:
        run_id = conn.execute(select(runs.c.id)).scalar_one()
    run = stack.app.workflows.get(run_id)
    assert run.state == "succeeded"
    assert run.steps["address"].result == {"to": ALICE["email"], "plan": "p"}
    # Forgetting the subject erases the result with the rest.
    with stack.service.unit_of_work(TestUsers.admin) as request:
        forget_subject(
            request,
            stack.service.personal,
            tenant_id=TestUsers.admin.tenant_id,
            subject=str(created["id"]),
            by="test",
            reason="erasure request",
        )
    forgotten = stack.app.workflows.get(run_id)
    assert forgotten.steps["address"].result == {"to": FORGOTTEN, "plan": "p"}


fan = Feature("fan")
echo = fan.workflow("echo", on="personal:write:customer:create")


@echo.step("split")
def split(payload: dict[str, Any], ctx: StepContext) -> list[str]:
    return [payload["email"], payload["name"], "plain"]


@echo.step("each", after="split", map=lambda ctx: ctx.results["split"])
def each(item: str, ctx: StepContext) -> dict[str, str]:
    return {"seen": item}


@pytest.mark.parametrize("database", ["postgres", "sqlite"])
def test_the_results_of_a_mapped_steps_items_are_stored_sealed(asanoha_stack, database):
    # Each item but the last ends on its own (no run row lock, no fan-in to start): its
    # result is sealed all the same.
    stack = asanoha_stack(features=[personal, fan], jobs=True, database=database)
    stack.http.write_ok(
        "personal:write:customer:create",
        {"email": ALICE["email"], "name": ALICE["name"], "plan": "p"},
        TestUsers.admin,
    )
    stack.drain()
    assert hits(stack, [ALICE["email"], ALICE["name"]]) == []
    runs = stack.tables.workflow_runs
    with stack.db.connect() as conn:
        run_id = conn.execute(select(runs.c.id)).scalar_one()
    run = stack.app.workflows.get(run_id)
    assert run.state == "succeeded"
    assert run.steps["each"].result == [
        {"seen": ALICE["email"]},
        {"seen": ALICE["name"]},
        {"seen": "plain"},
    ]
