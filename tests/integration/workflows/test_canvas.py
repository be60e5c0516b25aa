"""Ad-hoc workflows over declared jobs: ``chain``, ``group``, ``chord`` and ``job``, started from
code and driven as runs of ``asanoha:workflow:canvas``."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from pydantic import BaseModel
from sqlalchemy import func, select

from asanoha import (
    Access,
    Feature,
    JobContext,
    NotFoundError,
    WorkflowFailedError,
    WriteContext,
    chain,
    chord,
    group,
    job,
)
from asanoha.platform.model.canvas import CanvasError
from asanoha.testing import Stack, TestUsers

DATABASES = ["postgres", "sqlite"]
ADMIN = Access(roles=["Admin"])


class Order(BaseModel):
    order: str


def _shop(seen: list[tuple[str, Any]], *, fail_score: int | None = None) -> Feature:
    shop = Feature("shop")

    @shop.job("fetch", manual=True)
    def fetch(payload: dict[str, Any], ctx: JobContext) -> dict[str, Any]:
        seen.append(("fetch", payload))
        return {"order": payload["order"], "lines": 3}

    @shop.job("score", manual=True, retries=1)
    def score(payload: dict[str, Any], ctx: JobContext) -> int:
        seen.append(("score", payload))
        if payload["n"] == fail_score:
            raise RuntimeError(f"cannot score {payload['n']}")
        return int(payload["n"]) * 10

    @shop.job("total", manual=True)
    def total(payload: dict[str, Any], ctx: JobContext) -> int:
        seen.append(("total", payload))
        return sum(payload["results"])

    @shop.job("ship", manual=True)
    def ship(payload: dict[str, Any], ctx: JobContext) -> str:
        seen.append(("ship", payload))
        return f"shipped {payload['results'][0]['order']}"

    @shop.write_handler("place", access=ADMIN)
    def place(payload: Order, ctx: WriteContext) -> dict[str, str]:
        run_id = ctx.start_workflow(
            chain(job("shop:job:fetch", {"order": payload.order}), job("shop:job:ship"))
        )
        return {"run": str(run_id)}

    return shop


def _count(stack: Stack, table: Any) -> int:
    with stack.db.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar_one())


@pytest.mark.parametrize("database", DATABASES)
def test_a_chain_passes_each_result_to_the_next_job(asanoha_stack, database):
    seen: list[tuple[str, Any]] = []
    stack = asanoha_stack(features=[_shop(seen)], jobs=True, database=database)
    run_id = stack.app.workflows.start(
        chain(job("shop:job:fetch", {"order": "o-1"}), job("shop:job:ship", {"carrier": "dhl"}))
    )
    stack.drain()
    assert seen == [
        ("fetch", {"order": "o-1"}),
        ("ship", {"carrier": "dhl", "results": [{"order": "o-1", "lines": 3}]}),
    ]
    run = stack.app.workflows.get(run_id)
    assert (run.workflow, run.state) == ("asanoha:workflow:canvas", "succeeded")
    assert run.result == "shipped o-1"
    # Its steps in the canvas's order, each naming the job it ran.
    assert list(run.steps) == ["s1-fetch", "s2-ship"]
    assert run.steps["s1-fetch"].result == {"order": "o-1", "lines": 3}
    assert all(step.state == "succeeded" for step in run.steps.values())


@pytest.mark.parametrize("database", DATABASES)
def test_a_chord_runs_its_body_once_with_every_result_in_group_order(asanoha_stack, database):
    seen: list[tuple[str, Any]] = []
    stack = asanoha_stack(features=[_shop(seen)], jobs=True, database=database)
    scores = group(job("shop:job:score", {"n": n}) for n in range(1, 9))
    run_id = stack.app.workflows.start(chord(scores, job("shop:job:total")))
    stack.drain()
    totals = [payload for name, payload in seen if name == "total"]
    assert totals == [{"results": [10, 20, 30, 40, 50, 60, 70, 80]}]
    run = stack.app.workflows.get(run_id)
    assert (run.state, run.result) == ("succeeded", 360)
    assert len(run.steps) == 9


@pytest.mark.parametrize("database", DATABASES)
def test_a_failing_member_fails_the_run_and_drain_names_its_step(asanoha_stack, database):
    seen: list[tuple[str, Any]] = []
    stack = asanoha_stack(features=[_shop(seen, fail_score=2)], jobs=True, database=database)
    run_id = stack.app.workflows.start(
        chord(
            [job("shop:job:score", {"n": 1}), job("shop:job:score", {"n": 2})],
            job("shop:job:total"),
        )
    )
    with pytest.raises(WorkflowFailedError) as raised:
        stack.drain()
    [failure] = raised.value.steps
    assert (failure.workflow_qn, failure.step, failure.run_id) == (
        "asanoha:workflow:canvas", "s2-score", str(run_id),
    )  # fmt: skip
    assert "RuntimeError: cannot score 2" in str(raised.value)
    run = stack.app.workflows.get(run_id)
    assert (run.state, run.failed_step) == ("failed", "s2-score")
    assert run.steps["s2-score"].attempts == 2
    assert run.steps["s3-total"].state == "cancelled"
    assert not [name for name, _ in seen if name == "total"]
    outbox = stack.tables.outbox
    with stack.db.connect() as conn:
        placed = conn.execute(
            select(func.count()).where(outbox.c.job_qn == "shop:job:total")
        ).scalar()
    assert placed == 0


@pytest.mark.parametrize("database", DATABASES)
def test_a_failed_canvas_run_is_retried_from_its_failed_step(asanoha_stack, database):
    seen: list[tuple[str, Any]] = []
    failing = {"n": 2}

    shop = _shop(seen, fail_score=None)
    stack = asanoha_stack(features=[shop], jobs=True, database=database)
    score = stack.app.registry.job("shop:job:score")
    original = score.func

    def flaky(payload: dict[str, Any], ctx: JobContext) -> Any:
        if payload["n"] == failing["n"]:
            raise RuntimeError("not yet")
        return original(payload, ctx)

    object.__setattr__(score, "func", flaky)
    run_id = stack.app.workflows.start(
        chord(
            [job("shop:job:score", {"n": 1}), job("shop:job:score", {"n": 2})],
            job("shop:job:total"),
        )
    )
    with pytest.raises(WorkflowFailedError):
        stack.drain()
    failing["n"] = -1
    stack.app.workflows.retry(run_id)
    stack.drain()
    run = stack.app.workflows.get(run_id)
    assert (run.state, run.result) == ("succeeded", 30)
    # What succeeded before the failure ran once.
    assert [payload for name, payload in seen if name == "score"] == [{"n": 1}, {"n": 2}]


@pytest.mark.parametrize("database", DATABASES)
def test_a_write_handler_starts_a_canvas_that_commits_with_it(asanoha_stack, database):
    seen: list[tuple[str, Any]] = []
    stack = asanoha_stack(features=[_shop(seen)], jobs=True, database=database)
    started = stack.http.write_ok("shop:write:place", {"order": "o-7"}, TestUsers.admin)
    stack.drain()
    run = stack.app.workflows.get(started["run"])
    assert (run.state, run.result) == ("succeeded", "shipped o-7")
    assert [name for name, _ in seen] == ["fetch", "ship"]


def test_a_canvas_naming_an_undeclared_job_starts_nothing(asanoha_stack):
    stack = asanoha_stack(features=[_shop([])], jobs=True)
    with pytest.raises(NotFoundError) as missing:
        stack.app.workflows.start(
            chain(job("shop:job:fetch", {"order": "o"}), job("shop:job:nope"))
        )
    assert (missing.value.http_status, missing.value.reason) == (404, "job_not_found")
    assert _count(stack, stack.tables.workflow_runs) == 0
    assert _count(stack, stack.tables.outbox) == 0


def test_a_step_of_a_declared_workflow_is_no_canvas_job(asanoha_stack):
    shop = _shop([])
    fulfil = shop.workflow("fulfil", manual=True)

    @fulfil.step("pack")
    def pack(payload: dict[str, Any], ctx: Any) -> None:
        return None

    stack = asanoha_stack(features=[shop], jobs=True)
    with pytest.raises(CanvasError, match="shop:workflow:fulfil:pack is a step of"):
        stack.app.workflows.start(chain(job("shop:workflow:fulfil:pack")))
    assert _count(stack, stack.tables.workflow_runs) == 0


def test_canvases_that_cannot_run_are_refused_when_built():
    with pytest.raises(CanvasError, match="at least one part"):
        chain()
    with pytest.raises(CanvasError, match="takes jobs, chains, groups or chords"):
        group(job("a:job:b"), "a:job:c")  # type: ignore[arg-type]
    with pytest.raises(CanvasError, match="'results' is the platform's"):
        job("a:job:b", {"results": []})
    with pytest.raises(CanvasError, match="payload must be a dict"):
        job("a:job:b", [1, 2])  # type: ignore[arg-type]


def test_a_running_canvas_is_cancelled(asanoha_stack):
    started, release = threading.Event(), threading.Event()
    shop = Feature("shop")

    @shop.job("slow", manual=True)
    def slow(payload: dict[str, Any], ctx: JobContext) -> int:
        started.set()
        release.wait(30)
        ctx.checkpoint()
        return 1

    @shop.job("after", manual=True)
    def after(payload: dict[str, Any], ctx: JobContext) -> None:
        raise AssertionError("a cancelled run's next step must not run")

    stack = asanoha_stack(features=[shop], jobs=True)
    run_id = stack.app.workflows.start(chain(job("shop:job:slow"), job("shop:job:after")))
    drained: dict[str, Any] = {}
    worker = threading.Thread(target=lambda: drained.setdefault("summary", stack.drain(timeout=60)))
    worker.start()
    assert started.wait(30)
    run = stack.app.workflows.cancel(run_id)
    release.set()
    worker.join(60)
    assert run.state == "cancelled"
    assert stack.app.workflows.get(run_id).steps["s2-after"].state == "cancelled"
