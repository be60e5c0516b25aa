"""A workflow's held steps: ``.wait(...)`` resumes on the first matching event appended
after the run started (also before the run reached it), once, or fails at its timeout;
``.approval(...)`` resumes when a person approves, never an agent, once. A drain settles
while a run waits for either."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from pydantic import BaseModel
from sqlalchemy import func, select

from asanoha import Access, StepContext, WorkflowFailedError, WriteContext
from asanoha.handlers import workflow_admin
from asanoha.platform.errors import (
    AccessDeniedError,
    DefinitionError,
    NotFoundError,
    UnprocessableError,
)
from asanoha.platform.jobs import workflow_waits
from asanoha.platform.model import Feature, Registry, SessionUser

DAY = 86400.0
ADMIN = SessionUser.of("admin-a", "acme", ["Admin", "SystemAdmin"])
CLERK = SessionUser.of("clerk-a", "acme", ["Clerk"])
AGENT = SessionUser.of("assistant-a", "acme", ["Admin", "SystemAdmin"]).as_agent("run-7")
PAID = "billing:event:invoice.paid"
ONBOARD = "crm:workflow:onboard"


class InvoicePaid(BaseModel):
    order_id: str
    amount: int


def _billing() -> Feature:
    billing = Feature("billing")
    paid = billing.event("invoice.paid", InvoicePaid)

    @billing.write_handler("pay", access=Access(roles=["Admin", "system"]))
    def pay(payload: InvoicePaid, ctx: WriteContext) -> None:
        ctx.append_event(paid, payload.model_dump(), stream_id=payload.order_id)

    return billing


def _crm(*, prepay: bool = False, on_timeout: str = "fail") -> Feature:
    crm = Feature("crm")
    onboard = crm.workflow("onboard", manual=True)

    @onboard.step("send")
    def send(payload: dict[str, Any], ctx: StepContext) -> str:
        if prepay:
            # Paid before the run reaches its wait: the wait finds the event at once.
            ctx.write("billing:write:pay", {"order_id": payload["order_id"], "amount": 7})
        return "sent"

    onboard.wait(
        "paid",
        after="send",
        event=PAID,
        match={"order_id": "order_id"},
        timeout=3 * DAY,
        on_timeout=on_timeout,  # type: ignore[arg-type]
    )
    onboard.approval("publish-ok", after="paid", access=Access(roles=["Admin"]))

    @onboard.step("publish", after=["publish-ok"])
    def publish(payload: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        paid = ctx.results["paid"]
        return {
            "amount": None if paid is None else paid["payload"]["amount"],
            "approved_by": ctx.results["publish-ok"]["approved_by"],
        }

    return crm


def _stack(asanoha_stack: Any, database: str, **crm: Any) -> Any:
    return asanoha_stack(
        features=[_billing(), _crm(**crm), workflow_admin.feature], jobs=True, database=database
    )


def _pay(stack: Any, order_id: str, amount: int) -> None:
    stack.http.write_ok("billing:write:pay", {"order_id": order_id, "amount": amount}, ADMIN)


def _steps(stack: Any, run_id: uuid.UUID) -> dict[str, str]:
    return {name: step.state for name, step in stack.app.workflows.get(run_id).steps.items()}


def _approvals(stack: Any) -> int:
    table = stack.tables.agent_approvals
    with stack.db.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar_one())


@pytest.mark.parametrize("database", ["postgres", "sqlite"])
def test_a_run_waits_for_its_event_then_for_a_person_then_finishes(
    asanoha_stack: Any, database: str
) -> None:
    stack = _stack(asanoha_stack, database)
    run_id = stack.app.workflows.start(ONBOARD, {"order_id": "o-1"}, ADMIN)
    # The drain settles with the run waiting: a wait is no work for a worker.
    stack.drain()
    assert _steps(stack, run_id)["paid"] == "running"
    assert stack.app.workflows.get(run_id).state == "waiting"

    # Another order's payment does not resume it; its own does.
    _pay(stack, "o-2", 5)
    stack.drain()
    assert _steps(stack, run_id)["paid"] == "running"
    _pay(stack, "o-1", 40)
    stack.drain()
    run = stack.app.workflows.get(run_id)
    assert run.steps["paid"].state == "succeeded"
    assert run.steps["paid"].result["payload"] == {"order_id": "o-1", "amount": 40}
    assert run.steps["publish-ok"].state == "running"

    # An agent never approves; neither does a clerk the step's access= leaves out. Nothing
    # is recorded and the run still waits.
    denied = stack.http.write_err(
        "workflow-admin:write:approve", {"id": str(run_id), "step": "publish-ok"}, AGENT
    )
    assert (denied.http_status, denied.code, denied.reason) == (
        403,
        "access_denied",
        "agent.approver_is_agent",
    )
    with pytest.raises(AccessDeniedError) as clerk:
        stack.app.workflows.approve(run_id, "publish-ok", CLERK)
    assert clerk.value.reason == "role_required"
    # A person of another tenant does not find the run.
    stranger = SessionUser.of("admin-b", "globex", ["Admin", "SystemAdmin"])
    with pytest.raises(NotFoundError) as elsewhere:
        stack.app.workflows.approve(run_id, "publish-ok", stranger)
    assert elsewhere.value.reason == "workflow_run_not_found"
    assert _approvals(stack) == 0
    assert _steps(stack, run_id)["publish-ok"] == "running"

    approved = stack.http.write_ok(
        "workflow-admin:write:approve", {"id": str(run_id), "step": "publish-ok"}, ADMIN
    )
    assert approved["state"] == "running"
    stack.drain()
    run = stack.app.workflows.get(run_id)
    assert (run.state, run.result) == ("succeeded", {"amount": 40, "approved_by": "admin-a"})
    assert _approvals(stack) == 1
    table = stack.tables.agent_approvals
    with stack.db.connect() as conn:
        record = conn.execute(select(table)).one()
    assert (record.handler_qn, record.target_id, record.approved_by, record.channel) == (
        f"{ONBOARD}:publish-ok",
        str(run_id),
        "admin-a",
        "http",
    )
    assert record.used_at is not None

    # Single use: a second approval answers 409 and records nothing.
    again = stack.http.write_err(
        "workflow-admin:write:approve", {"id": str(run_id), "step": "publish-ok"}, ADMIN
    )
    assert (again.http_status, again.reason) == (409, "workflow_step_not_waiting")
    assert _approvals(stack) == 1


@pytest.mark.parametrize("database", ["postgres", "sqlite"])
def test_an_event_appended_before_the_run_reached_its_wait_resumes_it(
    asanoha_stack: Any, database: str
) -> None:
    stack = _stack(asanoha_stack, database, prepay=True)
    run_id = stack.app.workflows.start(ONBOARD, {"order_id": "o-9"}, ADMIN)
    stack.drain()
    run = stack.app.workflows.get(run_id)
    assert run.steps["paid"].state == "succeeded"
    assert run.steps["paid"].result["payload"]["amount"] == 7
    assert run.steps["publish-ok"].state == "running"


@pytest.mark.parametrize("database", ["postgres", "sqlite"])
def test_an_event_older_than_the_run_does_not_resume_it_and_the_wait_times_out(
    asanoha_stack: Any, database: str
) -> None:
    stack = _stack(asanoha_stack, database)
    _pay(stack, "o-3", 1)
    stack.drain()
    run_id = stack.app.workflows.start(ONBOARD, {"order_id": "o-3"}, ADMIN)
    stack.drain()
    assert _steps(stack, run_id)["paid"] == "running"

    assert stack.advance_clock(3 * DAY) == 1
    with pytest.raises(WorkflowFailedError, match="'paid'") as failed:
        stack.drain()
    assert [step.step for step in failed.value.steps] == ["paid"]
    run = stack.app.workflows.get(run_id)
    assert (run.state, run.failed_step) == ("failed", "paid")
    assert "waited 259200 s for the event billing:event:invoice.paid" in (run.error or "")
    # A payment after the timeout resumes nothing.
    _pay(stack, "o-3", 2)
    stack.drain()
    assert stack.app.workflows.get(run_id).state == "failed"

    # Retried, the wait waits again for its whole time (the drain settles at once), and
    # the next payment resumes it.
    stack.app.workflows.retry(run_id)
    stack.drain()
    assert _steps(stack, run_id)["paid"] == "running"
    _pay(stack, "o-3", 3)
    stack.drain()
    run = stack.app.workflows.get(run_id)
    assert (run.steps["paid"].state, run.steps["paid"].result["payload"]["amount"]) == (
        "succeeded",
        3,
    )


@pytest.mark.parametrize("database", ["sqlite"])
def test_a_wait_declared_to_continue_goes_on_without_its_event(
    asanoha_stack: Any, database: str
) -> None:
    stack = _stack(asanoha_stack, database, on_timeout="continue")
    run_id = stack.app.workflows.start(ONBOARD, {"order_id": "o-4"}, ADMIN)
    stack.drain()
    stack.advance_clock(3 * DAY)
    stack.drain()
    run = stack.app.workflows.get(run_id)
    assert (run.steps["paid"].state, run.steps["paid"].result) == ("succeeded", None)
    stack.app.workflows.approve(run_id, "publish-ok", ADMIN)
    stack.drain()
    assert stack.app.workflows.get(run_id).result == {"amount": None, "approved_by": "admin-a"}


@pytest.mark.parametrize("database", ["postgres", "sqlite"])
def test_one_event_resumes_each_matching_run_once(asanoha_stack: Any, database: str) -> None:
    stack = _stack(asanoha_stack, database)
    first = stack.app.workflows.start(ONBOARD, {"order_id": "o-5"}, ADMIN)
    second = stack.app.workflows.start(ONBOARD, {"order_id": "o-5"}, ADMIN)
    stack.drain()
    _pay(stack, "o-5", 9)
    stack.drain()
    assert _steps(stack, first)["paid"] == _steps(stack, second)["paid"] == "succeeded"

    # The same event delivered again (a consumer restarted behind it) resumes nothing.
    events = stack.tables.events
    with stack.db.connect() as conn:
        row = conn.execute(select(events).where(events.c.type == PAID)).one()
    event = workflow_waits.MatchedEvent(
        row.id, row.type, row.tenant_id, row.stream_id, row.payload, row.created_at
    )
    workflow = stack.registry.workflow(ONBOARD)
    with stack.db.begin() as conn:
        messages = workflow_waits.event_matched(
            conn,
            stack.tables,
            stack.registry.workflow,
            [(workflow, workflow.steps["paid"])],
            event,
        )
    assert messages == []
    items = stack.tables.workflow_items
    with stack.db.connect() as conn:
        resumed = conn.execute(
            select(func.count()).select_from(items).where(items.c.step == "paid")
        ).scalar_one()
    assert resumed == 2
    assert [stack.app.workflows.get(run).steps["publish-ok"].state for run in (first, second)] == [
        "running",
        "running",
    ]


@pytest.mark.parametrize("database", ["sqlite"])
def test_an_agents_principal_never_approves_the_run_its_agent_started(
    asanoha_stack: Any, database: str
) -> None:
    stack = _stack(asanoha_stack, database, prepay=True)
    run_id = stack.app.workflows.start(ONBOARD, {"order_id": "o-6"}, AGENT)
    stack.drain()
    # The agent's own principal, under a session without the agent claim.
    principal = SessionUser.of("assistant-a", "acme", ["Admin"])
    with pytest.raises(AccessDeniedError) as refused:
        stack.app.workflows.approve(run_id, "publish-ok", principal)
    assert refused.value.reason == "agent.approver_is_agent"
    with pytest.raises(UnprocessableError) as not_approval:
        stack.app.workflows.approve(run_id, "paid", ADMIN)
    assert not_approval.value.reason == "workflow_step_not_approval"
    with pytest.raises(NotFoundError) as unknown:
        stack.app.workflows.approve(run_id, "nope", ADMIN)
    assert unknown.value.reason == "workflow_step_not_found"
    assert _approvals(stack) == 0
    stack.app.workflows.approve(run_id, "publish-ok", ADMIN)
    stack.drain()
    assert stack.app.workflows.get(run_id).state == "succeeded"


def test_a_wait_on_an_event_no_feature_declares_fails_at_definition() -> None:
    crm = Feature("crm")
    flow = crm.workflow("flow", manual=True)

    @flow.step("one")
    def one(payload: dict[str, Any], ctx: StepContext) -> None: ...

    flow.wait("paid", after="one", event="billing:event:nope")
    with pytest.raises(DefinitionError, match="crm:workflow:flow: step 'paid' waits for"):
        Registry([crm])


@pytest.mark.parametrize(
    ("declare", "message"),
    [
        (
            lambda flow: flow.wait("w", event=PAID, match={"order_id": 3}),
            "match= maps event payload fields",
        ),
        (lambda flow: flow.wait("w", event="paid"), "event= names an event QN"),
        (lambda flow: flow.wait("w", event=PAID, timeout=0), "timeout must be"),
        (lambda flow: flow.wait("w", event=PAID, on_timeout="skip"), "on_timeout="),
        (lambda flow: flow.approval("a", access="Admin"), "access= takes an Access"),
    ],
)
def test_a_held_step_declared_wrong_fails_at_definition(declare: Any, message: str) -> None:
    flow = Feature("crm").workflow("flow", manual=True)
    with pytest.raises(DefinitionError, match=message):
        declare(flow)


@pytest.mark.parametrize("database", ["postgres", "sqlite"])
def test_each_tick_of_a_cron_workflow_starts_one_run(asanoha_stack: Any, database: str) -> None:
    from asanoha.workers.cron_tasks import enqueue_cron_tick

    reports = Feature("reports")
    nightly = reports.workflow("nightly", cron="0 2 * * *")

    @nightly.step("gather")
    def gather(payload: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        return {"payload": payload, "run": str(ctx.run_id)}

    stack = asanoha_stack(features=[reports], jobs=True, database=database)
    job = stack.registry.job("reports:workflow:nightly:cron")
    assert (job.cron, job.description) == (
        "0 2 * * *",
        "starts a run of reports:workflow:nightly at each tick of '0 2 * * *'",
    )
    app = stack.app
    tick = "2026-12-07T02:00:00+00:00"
    [first] = enqueue_cron_tick(app.service, app.settings, job.qn, tick)
    # Another beat's copy of the same tick places no second row.
    assert enqueue_cron_tick(app.service, app.settings, job.qn, tick) == [first]
    stack.drain()
    [run] = app.workflows.runs()
    assert (run.workflow_qn, run.state) == ("reports:workflow:nightly", "succeeded")
    assert app.workflows.get(run.id).result == {"payload": {}, "run": str(run.id)}


def test_a_cron_workflow_keeps_the_name_of_its_starting_job() -> None:
    flow = Feature("reports").workflow("nightly", cron="0 2 * * *")
    with pytest.raises(DefinitionError, match="the name is taken by the job that starts a run"):
        flow.step("cron")
    with pytest.raises(DefinitionError, match="per_tenant=True applies to cron ticks"):
        Feature("other").workflow("flow", manual=True, per_tenant=True)
    with pytest.raises(DefinitionError, match="cron"):
        Feature("third").workflow("flow", cron="every day")


def test_a_wait_is_resumed_by_an_event_whose_writer_commits_after_a_later_one(
    asanoha_stack: Any,
) -> None:
    import threading

    billing = _billing()
    appended, release = threading.Event(), threading.Event()

    @billing.write_handler("pay-slowly", access=Access(roles=["Admin"]))
    def pay_slowly(payload: InvoicePaid, ctx: WriteContext) -> None:
        ctx.append_event(PAID, payload.model_dump(), stream_id=payload.order_id)
        # Its event has its id; the transaction stays open while a later one commits.
        appended.set()
        assert release.wait(timeout=30)

    # Concurrent writers need a database that takes them (Postgres).
    stack = asanoha_stack(
        features=[billing, _crm(), workflow_admin.feature], jobs=True, database="postgres"
    )
    run_id = stack.app.workflows.start(ONBOARD, {"order_id": "o-7"}, ADMIN)
    stack.drain()
    slow = threading.Thread(
        target=stack.service.dispatch_write,
        args=("billing:write:pay-slowly", {"order_id": "o-7", "amount": 70}, ADMIN),
    )
    slow.start()
    try:
        assert appended.wait(timeout=30)
        _pay(stack, "o-8", 80)  # a higher id, committed first
        stack.drain()
        assert _steps(stack, run_id)["paid"] == "running"
    finally:
        release.set()
        slow.join(timeout=30)
    stack.drain()
    run = stack.app.workflows.get(run_id)
    assert run.steps["paid"].result["payload"] == {"order_id": "o-7", "amount": 70}
    events = stack.tables.events
    with stack.db.connect() as conn:
        ids = dict(conn.execute(select(events.c.payload["amount"].as_integer(), events.c.id)).all())
    assert ids[70] < ids[80]  # the event that resumed the wait holds the lower id
