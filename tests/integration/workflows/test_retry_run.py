"""A failed run runs again from where it stopped: ``app.workflows.retry(run_id)``, or
``app.jobs.retry`` of its failed step's job row (the same transition); what succeeded runs
once, the items that did not succeed run again, the fan-in follows once."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from sqlalchemy import func, select

from asanoha import ConflictError, StepContext, WorkflowFailedError
from asanoha.platform.model import Feature

DATABASES = ["postgres", "sqlite"]


def _flaky(calls: list[tuple[str, Any]], broken: set[int]) -> Feature:
    """Five items scored; the items in ``broken`` fail (one attempt each) until the test
    mends them."""
    crm = Feature("crm")
    onboard = crm.workflow("onboard", manual=True)

    @onboard.step("fetch")
    def fetch(payload: dict[str, Any], ctx: StepContext) -> list[int]:
        calls.append(("fetch", None))
        return [1, 2, 3, 4, 5]

    @onboard.step("score", after="fetch", map=lambda ctx: ctx.results["fetch"], retries=0)
    def score(item: int, ctx: StepContext) -> int:
        calls.append(("score", item))
        if item in broken:
            raise RuntimeError(f"cannot score {item}")
        return item * 10

    @onboard.step("summarise", after="score")
    def summarise(payload: dict[str, Any], ctx: StepContext) -> int:
        calls.append(("summarise", list(ctx.results["score"])))
        return sum(ctx.results["score"])

    return crm


def _failed_run(stack: Any, broken: set[int]) -> uuid.UUID:
    run_id = stack.app.workflows.start("crm:workflow:onboard", {})
    with pytest.raises(WorkflowFailedError):
        stack.drain()
    assert stack.app.workflows.get(run_id).state == "failed"
    return run_id


def _published_rows(stack: Any, job_qn: str) -> int:
    outbox = stack.tables.outbox
    with stack.db.connect() as conn:
        return int(conn.execute(select(func.count()).where(outbox.c.job_qn == job_qn)).scalar_one())


@pytest.mark.parametrize("database", DATABASES)
def test_a_retried_run_reruns_only_what_did_not_succeed_and_fans_in_once(
    asanoha_stack: Any, database: str
) -> None:
    calls: list[tuple[str, Any]] = []
    broken = {3}
    stack = asanoha_stack(features=[_flaky(calls, broken)], jobs=True, database=database)
    run_id = _failed_run(stack, broken)
    assert ("summarise", [10, 20, 40, 50]) not in calls
    scored_before = sorted(item for name, item in calls if name == "score")

    broken.clear()
    calls.clear()
    run = stack.app.workflows.retry(run_id)
    # Read back after its commit: the worker may have finished the run already.
    assert run.state in ("running", "succeeded")
    assert (run.error, run.failed_step, run.failed_item) == (None, None, None)
    stack.drain()

    run = stack.app.workflows.get(run_id)
    assert run.state == "succeeded"
    assert run.result == 150
    # The item that failed ran again, and the items cancelled by its failure (those that
    # had not run); nothing that succeeded ran twice; fetch did not run again.
    rerun = sorted(item for name, item in calls if name == "score")
    assert 3 in rerun
    assert not set(rerun) & (set(scored_before) - {3})
    assert ("fetch", None) not in calls
    assert calls[-1] == ("summarise", [10, 20, 30, 40, 50])
    assert _published_rows(stack, "crm:workflow:onboard:summarise") == 1
    assert run.steps["score"].state == "succeeded"


@pytest.mark.parametrize("database", DATABASES)
def test_retrying_a_failed_steps_job_row_retries_its_run(asanoha_stack: Any, database: str) -> None:
    calls: list[tuple[str, Any]] = []
    broken = {2}
    stack = asanoha_stack(features=[_flaky(calls, broken)], jobs=True, database=database)
    run_id = _failed_run(stack, broken)
    failed_row = stack.app.workflows.get(run_id).steps["score"].items[1].job_id

    broken.clear()
    stack.app.jobs.retry(failed_row, requested_by="operator")
    stack.drain()
    run = stack.app.workflows.get(run_id)
    assert (run.state, run.result) == ("succeeded", 150)
    assert _published_rows(stack, "crm:workflow:onboard:summarise") == 1


@pytest.mark.parametrize("database", ["sqlite"])
def test_only_a_failed_run_is_retried(asanoha_stack: Any, database: str) -> None:
    calls: list[tuple[str, Any]] = []
    stack = asanoha_stack(features=[_flaky(calls, set())], jobs=True, database=database)
    run_id = stack.app.workflows.start("crm:workflow:onboard", {})
    stack.drain()
    assert stack.app.workflows.get(run_id).state == "succeeded"
    calls.clear()
    with pytest.raises(ConflictError) as refused:
        stack.app.workflows.retry(run_id)
    assert refused.value.reason == "workflow_run_not_failed"
    assert refused.value.details == {"id": str(run_id), "state": "succeeded"}
    stack.drain()
    assert calls == []
    assert stack.app.workflows.get(run_id).state == "succeeded"
