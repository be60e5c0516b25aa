"""Runs started by a write (``on=``) in its transaction, and the chain's origin in every step:
a run an agent's mid-risk call started cannot forget a row at a step."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel
from sqlalchemy import func, select

from asanoha import (
    Access,
    Agent,
    Entity,
    Feature,
    StepContext,
    WorkflowFailedError,
    WriteContext,
    fields,
)
from asanoha.platform.model import SessionUser
from asanoha.testing import Stack, TestUsers
from asanoha.testing.users import TENANT_A

ADMIN = Access(roles=["Admin"])
JOBS_ONLY = Access(roles=["system"])
AGENT = SessionUser.of("assistant-a", TENANT_A, ["Admin"]).as_agent("run-flow")
HUMAN = TestUsers.admin

memo = Entity(
    table="flow_memos",
    fields={"title": fields.text(required=True, personal=False, reason="fixture")},
)
flow = Feature("flow")
flow.crud("memo", memo, write=ADMIN, read=ADMIN)


class Target(BaseModel):
    id: str


@flow.write_handler("request-cleanup", access=ADMIN, description="Ask for a memo's removal.")
def request_cleanup(payload: Target, ctx: WriteContext) -> dict[str, str]:
    """Mid risk: it only asks; a step of its workflow does the forgetting."""
    return {"id": payload.id}


@flow.write_handler("erase-memo", access=JOBS_ONLY, agent=Agent(risk="high"))
def erase_memo(payload: Target, ctx: WriteContext) -> Any:
    return ctx.entity("memo").forget(payload.id)


cleanup = flow.workflow("cleanup", on="flow:write:request-cleanup")


@cleanup.step("check")
def check(payload: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
    return {"id": payload["id"]}


@cleanup.step("erase", after="check")
def erase(payload: dict[str, Any], ctx: StepContext) -> None:
    ctx.write("flow:write:erase-memo", {"id": ctx.results["check"]["id"]})


def _memos(stack: Stack) -> int:
    table = stack.tables.entity("flow:memo")
    with stack.db.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar_one())


def _runs(stack: Stack) -> list[Any]:
    runs = stack.tables.workflow_runs
    with stack.db.connect() as conn:
        return list(conn.execute(select(runs)).all())


def _make_memo(stack: Stack) -> str:
    return str(stack.http.write_ok("flow:write:memo:create", {"title": "old"}, HUMAN)["id"])


@pytest.mark.parametrize("database", ["postgres", "sqlite"])
def test_a_write_starts_its_workflow_in_its_transaction(asanoha_stack, database):
    stack = asanoha_stack(features=[flow], jobs=True, database=database)
    memo_id = _make_memo(stack)
    stack.http.write_ok("flow:write:request-cleanup", {"id": memo_id}, HUMAN)
    [run] = _runs(stack)
    assert (run.workflow_qn, run.payload) == ("flow:workflow:cleanup", {"id": memo_id})
    # The worker may have run it through already.
    assert run.state in ("running", "succeeded")
    assert run.headers["trigger_name"] == "flow:write:request-cleanup"
    stack.drain()
    assert stack.app.workflows.get(run.id).state == "succeeded"
    assert _memos(stack) == 0


def test_a_refused_write_starts_no_run(asanoha_stack):
    stack = asanoha_stack(features=[flow], jobs=True)
    stack.http.write_err("flow:write:request-cleanup", {"nope": 1}, HUMAN)
    assert _runs(stack) == []


def test_a_run_an_agents_mid_risk_call_started_cannot_forget_at_a_step(asanoha_stack):
    stack = asanoha_stack(features=[flow], jobs=True)
    memo_id = _make_memo(stack)
    stack.http.write_ok("flow:write:request-cleanup", {"id": memo_id}, AGENT)
    with pytest.raises(WorkflowFailedError) as failed:
        stack.drain()
    message = str(failed.value)
    assert "flow:workflow:cleanup: step 'erase' failed" in message
    assert "irreversible operation 'forget'" in message
    [run] = _runs(stack)
    got = stack.app.workflows.get(run.id)
    assert (got.state, got.failed_step) == ("failed", "erase")
    assert got.steps["check"].state == "succeeded"
    assert _memos(stack) == 1
    events = stack.tables.events
    with stack.db.connect() as conn:
        forgotten = conn.execute(
            select(func.count()).where(events.c.type == "flow:event:memo.forgotten")
        ).scalar_one()
    assert forgotten == 0


def test_the_same_run_started_by_a_person_forgets(asanoha_stack):
    stack = asanoha_stack(features=[flow], jobs=True)
    memo_id = _make_memo(stack)
    run_id = stack.app.workflows.start("flow:workflow:cleanup", {"id": memo_id}, HUMAN)
    stack.drain()
    assert stack.app.workflows.get(run_id).state == "succeeded"
    assert _memos(stack) == 0


def test_an_unknown_workflow_is_not_found(asanoha_stack):
    from asanoha import NotFoundError

    stack = asanoha_stack(features=[flow], jobs=True)
    with pytest.raises(NotFoundError) as missing:
        stack.app.workflows.start("flow:workflow:nope", {})
    assert missing.value.reason == "workflow_not_found"
    assert _runs(stack) == []
