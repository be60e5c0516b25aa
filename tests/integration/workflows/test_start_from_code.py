"""``ctx.start_workflow`` from a write handler (in its transaction) and from a job."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel
from sqlalchemy import func, select

from asanoha import Access, ConflictError, Feature, JobContext, StepContext, WriteContext
from asanoha.platform.errors import Reasons
from asanoha.testing import Stack, TestUsers

ADMIN = Access(roles=["Admin"])

shop = Feature("shop")
fulfil = shop.workflow("fulfil", manual=True)


@fulfil.step("pack")
def pack(payload: dict[str, Any], ctx: StepContext) -> str:
    return f"packed {payload['order']}"


class Order(BaseModel):
    order: str
    fail: bool = False


@shop.write_handler("place", access=ADMIN)
def place(payload: Order, ctx: WriteContext) -> dict[str, str]:
    run_id = ctx.start_workflow("shop:workflow:fulfil", {"order": payload.order})
    if payload.fail:
        raise ConflictError(Reasons.VERSION_CONFLICT, stream_id="x", current_version=1,
                            expected_version=0)  # fmt: skip
    return {"run": str(run_id)}


@shop.query_handler("peek", access=ADMIN)
def peek(payload: Order, ctx: Any) -> dict[str, str]:
    return {"run": str(ctx.start_workflow("shop:workflow:fulfil", {"order": payload.order}))}


@shop.job("nightly", manual=True)
def nightly(payload: dict[str, Any], ctx: JobContext) -> None:
    ctx.start_workflow("shop:workflow:fulfil", {"order": "nightly"})


def _runs(stack: Stack) -> int:
    runs = stack.tables.workflow_runs
    with stack.db.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(runs)).scalar_one())


@pytest.mark.parametrize("database", ["postgres", "sqlite"])
def test_a_write_handler_starts_a_run_that_commits_with_it(asanoha_stack, database):
    stack = asanoha_stack(features=[shop], jobs=True, database=database)
    error = stack.http.write_err(
        "shop:write:place", {"order": "o-1", "fail": True}, TestUsers.admin
    )
    assert (error.http_status, error.reason) == (409, "version_conflict")
    assert _runs(stack) == 0
    started = stack.http.write_ok("shop:write:place", {"order": "o-2"}, TestUsers.admin)
    stack.drain()
    run = stack.app.workflows.get(started["run"])
    assert (run.state, run.result) == ("succeeded", "packed o-2")


def test_a_query_may_not_start_a_run(asanoha_stack):
    stack = asanoha_stack(features=[shop], jobs=True)
    error = stack.http.query_err("shop:query:peek", {"order": "o-3"}, TestUsers.admin)
    assert (error.http_status, error.reason) == (403, "write_in_query_denied")
    assert _runs(stack) == 0


def test_a_job_starts_a_run(asanoha_stack):
    stack = asanoha_stack(features=[shop], jobs=True)
    stack.dispatch_job("shop:job:nightly", {})
    stack.drain()
    runs = stack.tables.workflow_runs
    with stack.db.connect() as conn:
        run_id = conn.execute(select(runs.c.id)).scalar_one()
    run = stack.app.workflows.get(run_id)
    assert (run.state, run.result) == ("succeeded", "packed nightly")


def test_an_unknown_run_is_not_found(asanoha_stack):
    import uuid

    from asanoha import NotFoundError

    stack = asanoha_stack(features=[shop])
    for run_id in ("not-an-id", uuid.uuid4()):
        with pytest.raises(NotFoundError) as missing:
            stack.app.workflows.get(run_id)
        assert (missing.value.http_status, missing.value.reason) == (404, "workflow_run_not_found")
        with pytest.raises(NotFoundError):
            stack.app.workflows.cancel(run_id)


def test_a_step_is_not_run_by_hand_as_a_job(asanoha_stack):
    from asanoha import UnprocessableError

    stack = asanoha_stack(features=[shop])
    with stack.nothing_written(), pytest.raises(UnprocessableError) as refused:
        stack.app.jobs.run("shop:workflow:fulfil:pack", {"order": "o-4"})
    assert (refused.value.http_status, refused.value.reason) == (422, "job_not_manual")
    assert "step of shop:workflow:fulfil" in str(refused.value)
