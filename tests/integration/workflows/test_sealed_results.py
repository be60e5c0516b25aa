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
