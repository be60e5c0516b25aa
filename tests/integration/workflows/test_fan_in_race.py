"""The barrier: the ends of a fan-out's last items, racing on Postgres, start its fan-in once."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest
from sqlalchemy import select

from asanoha import StepContext
from asanoha.platform.jobs.attempts import AttemptEnd, Claim, job_rows_for
from asanoha.platform.model import Feature

ITEMS = 4
RUNS = 8


def _fan() -> Feature:
    crm = Feature("crm")
    onboard = crm.workflow("onboard", manual=True)

    @onboard.step("fetch")
    def fetch(payload: dict[str, Any], ctx: StepContext) -> list[int]:
        return list(range(ITEMS))

    @onboard.step("score", after="fetch", map=lambda ctx: ctx.results["fetch"])
    def score(item: int, ctx: StepContext) -> int:
        return item

    @onboard.step("summarise", after="score")
    def summarise(payload: dict[str, Any], ctx: StepContext) -> None:
        return None

    return crm


def _rows(stack: Any, run_id: uuid.UUID, step: str) -> list[uuid.UUID]:
    items = stack.tables.workflow_items
    with stack.db.connect() as conn:
        found = conn.execute(
            select(items.c.job_id)
            .where(items.c.run_id == run_id, items.c.step == step)
            .order_by(items.c.item)
        ).scalars()
        return [uuid.UUID(str(job_id)) for job_id in found]


@pytest.mark.parametrize("database", ["postgres", "sqlite"])
def test_racing_ends_of_the_last_items_start_the_fan_in_exactly_once(asanoha_stack, database):
    # No worker: this test claims and ends the rows itself, the ends on threads at once.
    stack = asanoha_stack(features=[_fan()], database=database)
    rows = job_rows_for(stack.db, stack.tables)
    rows.workflow_of = stack.registry.workflow
    qn = "crm:workflow:onboard"

    def run_row(row_id: uuid.UUID, result: Any, gate: threading.Barrier | None) -> None:
        claim = rows.claim(row_id, 1)
        assert isinstance(claim, Claim)
        if gate is not None:
            gate.wait(10)
        ended = rows.end(
            row_id, claim.job_qn, "default", 1, claim,
            AttemptEnd("succeeded", "succeeded", result=result),
        )  # fmt: skip
        assert ended

    for _ in range(RUNS):
        run_id = stack.app.workflows.start(qn, {})
        [fetch_row] = _rows(stack, run_id, "fetch")
        run_row(fetch_row, list(range(ITEMS)), None)
        score_rows = _rows(stack, run_id, "score")
        assert len(score_rows) == ITEMS
        gate = threading.Barrier(ITEMS)
        errors: list[BaseException] = []

        def end_one(
            row_id: uuid.UUID,
            index: int,
            gate: threading.Barrier = gate,
            errors: list[BaseException] = errors,
        ) -> None:
            try:
                run_row(row_id, index * 10, gate)
            except BaseException as exc:  # reported below, on the test's thread
                errors.append(exc)

        threads = [
            threading.Thread(target=end_one, args=(row_id, index))
            for index, row_id in enumerate(score_rows)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert errors == []
        assert len(_rows(stack, run_id, "summarise")) == 1
        run = stack.app.workflows.get(run_id)
        assert run.steps["score"].state == "succeeded"
        assert run.steps["score"].result == [index * 10 for index in range(ITEMS)]
        assert run.steps["summarise"].state == "running"


def test_an_item_that_is_not_its_steps_last_ends_while_its_runs_row_is_held(asanoha_stack):
    # A cancel, or the end of a step's last item, holds the run's row for its transaction;
    # the ends of the other items of a fan-out count down without waiting for it, and the
    # last one still starts the fan-in once, with every result in item order.
    stack = asanoha_stack(features=[_fan()], database="postgres")
    rows = job_rows_for(stack.db, stack.tables)
    rows.workflow_of = stack.registry.workflow
    runs = stack.tables.workflow_runs

    def run_row(row_id: uuid.UUID, result: Any) -> None:
        claim = rows.claim(row_id, 1)
        assert isinstance(claim, Claim)
        end = AttemptEnd("succeeded", "succeeded", result=result)
        assert rows.end(row_id, claim.job_qn, "default", 1, claim, end)

    run_id = stack.app.workflows.start("crm:workflow:onboard", {})
    [fetch_row] = _rows(stack, run_id, "fetch")
    run_row(fetch_row, list(range(ITEMS)))
    score_rows = _rows(stack, run_id, "score")
    errors: list[BaseException] = []

    def end_first() -> None:
        try:
            run_row(score_rows[0], 0)
        except BaseException as exc:  # reported below, on the test's thread
            errors.append(exc)

    with stack.db.connect() as holder:
        holder.execute(select(runs.c.id).where(runs.c.id == run_id).with_for_update())
        thread = threading.Thread(target=end_first)
        thread.start()
        # Only a failure waits here: an end that took the run's row waits for the rollback.
        thread.join(30)
        ended_while_held = not thread.is_alive()
        holder.rollback()
    thread.join(30)
    assert errors == []
    assert ended_while_held
    assert _rows(stack, run_id, "summarise") == []
    for index, row_id in enumerate(score_rows[1:], start=1):
        run_row(row_id, index * 10)
    assert len(_rows(stack, run_id, "summarise")) == 1
    run = stack.app.workflows.get(run_id)
    assert run.steps["score"].result == [index * 10 for index in range(ITEMS)]
    assert run.steps["summarise"].state == "running"
