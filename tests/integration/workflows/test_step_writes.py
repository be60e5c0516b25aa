"""A step's writes commit with its end: a step that fails after writing leaves neither its
rows nor the jobs it enqueued, and its retry writes them once; while it runs, nobody else
sees them; its own queries do."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from sqlalchemy import func, select

from asanoha import Access, Backoff, Entity, Feature, StepContext, fields

SYSTEM = Access(roles=["system"])

mark = Entity(
    table="step_marks",
    fields={"label": fields.text(required=True, personal=False, reason="fixture")},
)


def _feature(
    failing_attempts: set[int], seen: list[Any], gate: dict[str, threading.Event]
) -> Feature:
    flow = Feature("flow")
    flow.crud("mark", mark, write=SYSTEM, read=SYSTEM)

    @flow.job("notify", manual=True)
    def notify(payload: dict[str, Any], ctx: Any) -> None:
        seen.append(("notified", payload["label"]))

    run = flow.workflow("write", manual=True)

    @run.step("mark", retries=1, backoff=Backoff.fixed(0.05))
    def mark_it(payload: dict[str, Any], ctx: StepContext) -> str:
        created = ctx.write("flow:write:mark:create", {"label": payload["label"]})
        # After a write: on SQLite the step holds the one writer, and progress still goes.
        ctx.progress(0.5, "marked")
        ctx.dispatch("flow:job:notify", {"label": payload["label"]})
        listed = ctx.query_as(ctx.system_user, "flow:query:mark:list", {})
        seen.append(("listed", [row["label"] for row in listed["rows"]]))
        if "written" in gate:
            gate["written"].set()
            assert gate["go_on"].wait(timeout=30)
        if ctx.attempt in failing_attempts:
            raise RuntimeError(f"attempt {ctx.attempt} fails after writing")
        return str(created["id"])

    return flow


def _marks(stack: Any) -> list[str]:
    table = stack.tables.entities["flow:mark"]
    with stack.db.connect() as conn:
        return list(conn.execute(select(table.c.label)).scalars())


def _job_rows(stack: Any, job_qn: str) -> int:
    outbox = stack.tables.outbox
    with stack.db.connect() as conn:
        return int(
            conn.execute(
                select(func.count()).select_from(outbox).where(outbox.c.job_qn == job_qn)
            ).scalar_one()
        )


@pytest.mark.parametrize("database", ["postgres", "sqlite"])
def test_a_step_that_fails_after_writing_leaves_nothing_and_its_retry_writes_once(
    asanoha_stack: Any, database: str
) -> None:
    seen: list[Any] = []
    stack = asanoha_stack(features=[_feature({1}, seen, {})], jobs=True, database=database)
    run_id = stack.app.workflows.start("flow:workflow:write", {"label": "once"})
    stack.drain()
    run = stack.app.workflows.get(run_id)
    assert run.state == "succeeded"
    assert [(item.attempts, item.state) for item in run.steps["mark"].items] == [(2, "succeeded")]
    # Attempt 1's row, its job and its queries' view went with its failure.
    assert _marks(stack) == ["once"]
    assert _job_rows(stack, "flow:job:notify") == 1
    assert seen.count(("notified", "once")) == 1
    # Each attempt's query saw its own write, and only that one.
    assert [entry for entry in seen if entry[0] == "listed"] == [
        ("listed", ["once"]),
        ("listed", ["once"]),
    ]


@pytest.mark.parametrize("database", ["postgres", "sqlite"])
def test_a_steps_writes_are_seen_only_once_its_end_commits(
    asanoha_stack: Any, database: str
) -> None:
    seen: list[Any] = []
    gate = {"written": threading.Event(), "go_on": threading.Event()}
    stack = asanoha_stack(features=[_feature(set(), seen, gate)], jobs=True, database=database)
    # Started from a thread of its own: on SQLite its publish after commit waits for the
    # writer the step holds until its end, and this thread must be free to let it end.
    started: list[Any] = []
    starter = threading.Thread(
        target=lambda: started.append(
            stack.app.workflows.start("flow:workflow:write", {"label": "held"})
        )
    )
    starter.start()
    assert gate["written"].wait(timeout=30)
    # Written, and its job enqueued, but not committed: the step has not ended.
    assert _marks(stack) == []
    assert _job_rows(stack, "flow:job:notify") == 0
    gate["go_on"].set()
    starter.join(timeout=30)
    [run_id] = started
    stack.drain()
    assert stack.app.workflows.get(run_id).state == "succeeded"
    assert _marks(stack) == ["held"]
    assert seen.count(("notified", "held")) == 1
