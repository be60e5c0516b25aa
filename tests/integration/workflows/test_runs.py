"""Workflow runs on an in-process worker: chains, fan-out/fan-in, failures, cancel."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from sqlalchemy import func, select

from asanoha import StepContext, WorkflowFailedError
from asanoha.platform.model import Backoff, Feature

DATABASES = ["postgres", "sqlite"]


def _chain(seen: list[tuple[str, Any]]) -> Feature:
    shop = Feature("shop")
    order = shop.workflow("order", manual=True)

    @order.step("fetch")
    def fetch(payload: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        seen.append(("fetch", dict(ctx.results)))
        return {"total": payload["amount"] * 2}

    @order.step("tax", after="fetch")
    def tax(payload: dict[str, Any], ctx: StepContext) -> int:
        seen.append(("tax", dict(ctx.results)))
        return int(ctx.results["fetch"]["total"] * 0.1)

    @order.step("book", after="tax")
    def book(payload: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        seen.append(("book", dict(ctx.results)))
        assert ctx.item is None and ctx.step == "book"
        return {
            "booked": ctx.results["fetch"]["total"] + ctx.results["tax"],
            "run": str(ctx.run_id),
        }

    return shop


@pytest.mark.parametrize("database", DATABASES)
def test_a_chain_of_three_steps_passes_results_on(asanoha_stack, database):
    seen: list[tuple[str, Any]] = []
    stack = asanoha_stack(features=[_chain(seen)], jobs=True, database=database)
    run_id = stack.app.workflows.start("shop:workflow:order", {"amount": 50})
    stack.drain()
    assert seen == [
        ("fetch", {}),
        ("tax", {"fetch": {"total": 100}}),
        ("book", {"fetch": {"total": 100}, "tax": 10}),
    ]
    run = stack.app.workflows.get(run_id)
    assert run.state == "succeeded"
    assert run.result == {"booked": 110, "run": str(run_id)}
    assert {name: (step.state, step.attempts, step.result) for name, step in run.steps.items()} == {
        "fetch": ("succeeded", 1, {"total": 100}),
        "tax": ("succeeded", 1, 10),
        "book": ("succeeded", 1, {"booked": 110, "run": str(run_id)}),
    }
    outbox = stack.tables.outbox
    with stack.db.connect() as conn:
        qns = conn.execute(select(outbox.c.job_qn).order_by(outbox.c.created_at)).scalars().all()
    assert qns == [
        "shop:workflow:order:fetch",
        "shop:workflow:order:tax",
        "shop:workflow:order:book",
    ]


def _fan(items: int, fan_in_calls: list[list[Any]]) -> Feature:
    crm = Feature("crm")
    onboard = crm.workflow("onboard", manual=True)

    @onboard.step("fetch")
    def fetch(payload: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        return {"accounts": [{"n": n} for n in range(payload["count"])]}

    @onboard.step("score", after="fetch", map=lambda ctx: ctx.results["fetch"]["accounts"])
    def score(item: dict[str, Any], ctx: StepContext) -> int:
        assert ctx.item == item["n"]
        return item["n"] * 10

    @onboard.step("summarise", after="score")
    def summarise(payload: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        fan_in_calls.append(list(ctx.results["score"]))
        return {"sum": sum(ctx.results["score"])}

    return crm


@pytest.mark.parametrize("database", DATABASES)
def test_a_fan_out_of_fifty_items_fans_in_once_with_every_result_in_item_order(
    asanoha_stack, database
):
    calls: list[list[Any]] = []
    stack = asanoha_stack(features=[_fan(50, calls)], jobs=True, database=database)
    run_id = stack.app.workflows.start("crm:workflow:onboard", {"count": 50})
    stack.drain(timeout=60)
    assert calls == [[n * 10 for n in range(50)]]
    run = stack.app.workflows.get(run_id)
    assert run.state == "succeeded"
    assert run.result == {"sum": sum(n * 10 for n in range(50))}
    score = run.steps["score"]
    assert (score.state, len(score.items), score.attempts) == ("succeeded", 50, 50)
    assert score.result == [n * 10 for n in range(50)]
    outbox = stack.tables.outbox
    with stack.db.connect() as conn:
        summarise_rows = conn.execute(
            select(func.count()).where(outbox.c.job_qn == "crm:workflow:onboard:summarise")
        ).scalar()
    assert summarise_rows == 1


def _failing() -> Feature:
    crm = Feature("crm")
    onboard = crm.workflow("onboard", manual=True)

    @onboard.step("fetch")
    def fetch(payload: dict[str, Any], ctx: StepContext) -> list[int]:
        return [1, 2, 3]

    @onboard.step(
        "score", after="fetch", map=lambda ctx: ctx.results["fetch"], retries=1,
        backoff=Backoff.fixed(0.01),
    )  # fmt: skip
    def score(item: int, ctx: StepContext) -> int:
        if item == 2:
            raise RuntimeError(f"cannot score {item}")
        return item

    @onboard.step("summarise", after="score")
    def summarise(payload: dict[str, Any], ctx: StepContext) -> None:
        raise AssertionError("a fan-in after a failed step must not run")

    return crm


@pytest.mark.parametrize("database", DATABASES)
def test_a_step_failing_for_good_fails_the_run_and_drain_names_it(asanoha_stack, database):
    stack = asanoha_stack(features=[_failing()], jobs=True, database=database)
    run_id = stack.app.workflows.start("crm:workflow:onboard", {})
    with pytest.raises(WorkflowFailedError) as raised:
        stack.drain()
    message = str(raised.value)
    assert "crm:workflow:onboard: step 'score' item 1 failed" in message
    assert "RuntimeError: cannot score 2" in message
    [failure] = raised.value.steps
    assert (failure.workflow_qn, failure.step, failure.item, failure.run_id) == (
        "crm:workflow:onboard", "score", 1, str(run_id),
    )  # fmt: skip
    run = stack.app.workflows.get(run_id)
    assert (run.state, run.failed_step, run.failed_item) == ("failed", "score", 1)
    assert run.steps["score"].state == "failed"
    assert run.steps["score"].items[1].attempts == 2
    assert run.steps["summarise"].state == "cancelled"
    assert run.steps["summarise"].items == ()
    outbox = stack.tables.outbox
    with stack.db.connect() as conn:
        placed = conn.execute(
            select(func.count()).where(outbox.c.job_qn == "crm:workflow:onboard:summarise")
        ).scalar()
    assert placed == 0


def _cancellable(started: threading.Event, release: threading.Event) -> Feature:
    crm = Feature("crm")
    onboard = crm.workflow("onboard", manual=True)

    @onboard.step("fetch")
    def fetch(payload: dict[str, Any], ctx: StepContext) -> list[int]:
        return list(range(20))

    @onboard.step("score", after="fetch", map=lambda ctx: ctx.results["fetch"])
    def score(item: int, ctx: StepContext) -> int:
        if item == 0:
            started.set()
            # Held until the run is cancelled; then it sees the request and stops.
            release.wait(30)
            ctx.checkpoint()
        return item

    @onboard.step("summarise", after="score")
    def summarise(payload: dict[str, Any], ctx: StepContext) -> None:
        raise AssertionError("a cancelled run's fan-in must not run")

    return crm


@pytest.mark.parametrize("database", DATABASES)
def test_cancel_during_a_fan_out_stops_the_run(asanoha_stack, database):
    started, release = threading.Event(), threading.Event()
    stack = asanoha_stack(features=[_cancellable(started, release)], jobs=True, database=database)
    run_id = stack.app.workflows.start("crm:workflow:onboard", {})
    drained: dict[str, Any] = {}
    worker = threading.Thread(target=lambda: drained.setdefault("summary", stack.drain(timeout=60)))
    worker.start()
    assert started.wait(30)
    run = stack.app.workflows.cancel(run_id)
    release.set()
    worker.join(60)
    assert "summary" in drained
    assert run.state == "cancelled"
    run = stack.app.workflows.get(run_id)
    assert run.state == "cancelled"
    assert run.steps["score"].state == "cancelled"
    assert run.steps["score"].items[0].state == "cancelled"
    assert run.steps["summarise"].items == ()
    outbox = stack.tables.outbox
    with stack.db.connect() as conn:
        states = dict(
            conn.execute(
                select(outbox.c.state, func.count())
                .where(outbox.c.job_qn == "crm:workflow:onboard:score")
                .group_by(outbox.c.state)
            ).all()
        )
        placed = conn.execute(
            select(func.count()).where(outbox.c.job_qn == "crm:workflow:onboard:summarise")
        ).scalar()
    assert states.get("cancelled", 0) >= 1
    assert placed == 0


def _sleeper(ran: list[str]) -> Feature:
    crm = Feature("crm")
    onboard = crm.workflow("onboard", manual=True)

    @onboard.step("send")
    def send(payload: dict[str, Any], ctx: StepContext) -> str:
        ran.append("send")
        return "sent"

    onboard.sleep("cool-off", after="send", seconds=1)

    @onboard.step("publish", after="cool-off")
    def publish(payload: dict[str, Any], ctx: StepContext) -> str:
        ran.append("publish")
        return ctx.results["send"]

    return crm


@pytest.mark.parametrize("database", DATABASES)
def test_a_sleep_step_holds_the_steps_after_it_for_its_time(asanoha_stack, database):
    ran: list[str] = []
    stack = asanoha_stack(features=[_sleeper(ran)], jobs=True, database=database)
    run_id = stack.app.workflows.start("crm:workflow:onboard", {})
    stack.drain()
    assert ran == ["send", "publish"]
    run = stack.app.workflows.get(run_id)
    assert (run.state, run.result) == ("succeeded", "sent")
    outbox = stack.tables.outbox
    with stack.db.connect() as conn:
        rows = {
            row.job_qn: row
            for row in conn.execute(
                select(
                    outbox.c.job_qn, outbox.c.created_at, outbox.c.started_at,
                    outbox.c.finished_at,
                )
            ).all()
        }  # fmt: skip
    sleeping = rows["crm:workflow:onboard:cool-off"]
    # Written by the end of "send" with its time ahead in the row; the relay sends it then.
    assert (sleeping.started_at - sleeping.created_at).total_seconds() >= 1
    published = rows["crm:workflow:onboard:publish"]
    assert (
        published.started_at - rows["crm:workflow:onboard:send"].finished_at
    ).total_seconds() >= 1


@pytest.mark.parametrize("database", DATABASES)
def test_cancelling_a_steps_pending_job_row_cancels_its_run(asanoha_stack, database):
    # No worker: the first step's row waits pending for the operator's cancel.
    stack = asanoha_stack(features=[_chain([])], database=database)
    run_id = stack.app.workflows.start("shop:workflow:order", {"amount": 1})
    [fetch] = stack.app.workflows.get(run_id).steps["fetch"].items
    cancelled = stack.app.jobs.cancel(fetch.job_id)
    assert cancelled.state == "cancelled"
    run = stack.app.workflows.get(run_id)
    assert run.state == "cancelled"
    assert run.steps["fetch"].items[0].state == "cancelled"
    assert {step.state for step in run.steps.values()} == {"cancelled"}


@pytest.mark.parametrize("database", DATABASES)
def test_a_lost_final_attempt_of_a_step_fails_its_run(asanoha_stack, database):
    from asanoha.platform.jobs.attempts import Claim, job_rows_for, recover_lost_attempts

    # No worker: the step's attempt is claimed here and never ended (its worker died).
    stack = asanoha_stack(features=[_chain([])], database=database)
    run_id = stack.app.workflows.start("shop:workflow:order", {"amount": 1})
    [fetch] = stack.app.workflows.get(run_id).steps["fetch"].items
    assert isinstance(job_rows_for(stack.db, stack.tables).claim(fetch.job_id, 1), Claim)
    assert recover_lost_attempts(stack.db, stack.tables, lambda qn: 0, 0) == 1
    run = stack.app.workflows.get(run_id)
    assert (run.state, run.failed_step) == ("failed", "fetch")
    assert "WorkerLostError" in (run.error or "")
    assert run.steps["tax"].state == "cancelled"


def _bad_map() -> Feature:
    crm = Feature("crm")
    onboard = crm.workflow("onboard", manual=True)

    @onboard.step("fetch")
    def fetch(payload: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        return {"accounts": "not a list"}

    @onboard.step("score", after="fetch", map=lambda ctx: ctx.results["fetch"]["accounts"])
    def score(item: Any, ctx: StepContext) -> None:
        raise AssertionError("no item to score")

    return crm


@pytest.mark.parametrize("database", DATABASES)
def test_a_map_that_returns_no_list_fails_the_run_and_drain_names_the_step(asanoha_stack, database):
    stack = asanoha_stack(features=[_bad_map()], jobs=True, database=database)
    run_id = stack.app.workflows.start("crm:workflow:onboard", {})
    with pytest.raises(WorkflowFailedError) as raised:
        stack.drain()
    assert "crm:workflow:onboard: step 'score' failed" in str(raised.value)
    assert "map= of step crm:workflow:onboard:score must return a list, not str" in str(
        raised.value
    )
    run = stack.app.workflows.get(run_id)
    assert (run.state, run.failed_step) == ("failed", "score")
    assert run.steps["score"].items == ()
    stack.drain()  # reported once
