"""The bundled ``workflow-admin`` handlers: a system administrator starts a manual workflow,
lists and reads runs, retries a failed one and cancels a running one, over HTTP, each on the
functions ``App.workflows`` uses; another tenant's runs answer as unknown, except to the
operator tenant; a refused call leaves nothing behind."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel
from sqlalchemy import func, select

from asanoha import StepContext, WorkflowFailedError
from asanoha.handlers import workflow_admin
from asanoha.platform.model import Feature, SessionUser

ACME_ADMIN = SessionUser.of("acme-1", "acme", ["SystemAdmin"])
GLOBEX_ADMIN = SessionUser.of("globex-1", "globex", ["SystemAdmin"])
OPERATOR = SessionUser.of("ops-1", "ops", ["SystemAdmin"])
ACME_CLERK = SessionUser.of("acme-2", "acme", ["Clerk"])


class Order(BaseModel):
    item: str = "x"


def _features(broken: set[str]) -> Feature:
    shop = Feature("shop")
    report = shop.workflow("report", manual=True)

    @report.step("gather", retries=0)
    def gather(payload: dict[str, Any], ctx: StepContext) -> list[str]:
        if payload["name"] in broken:
            raise RuntimeError(f"cannot gather {payload['name']}")
        return [payload["name"], "b"]

    @report.step("write", after="gather")
    def write(payload: dict[str, Any], ctx: StepContext) -> str:
        return "+".join(ctx.results["gather"])

    @shop.write_handler("order", access=workflow_admin.SYSTEM_ADMINS)
    def order(payload: Order, ctx: Any) -> dict[str, Any]:
        return {}

    @shop.workflow("on-order", on="shop:write:order").step("noted")
    def noted(payload: dict[str, Any], ctx: StepContext) -> None:
        """Runs on each order; never started by hand."""

    return shop


def _runs(stack: Any) -> int:
    runs = stack.tables.workflow_runs
    with stack.db.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(runs)).scalar_one())


@pytest.mark.parametrize("database", ["postgres", "sqlite"])
def test_an_administrator_starts_reads_retries_and_lists_runs(
    asanoha_stack: Any, database: str
) -> None:
    broken = {"a"}
    stack = asanoha_stack(
        features=[_features(broken), workflow_admin.feature],
        jobs=True,
        database=database,
        settings={"operator_tenant": "ops"},
    )
    started = stack.http.write_ok(
        "workflow-admin:write:start",
        {"workflow": "shop:workflow:report", "payload": {"name": "a"}},
        ACME_ADMIN,
    )
    assert (started["workflow"], started["state"]) == ("shop:workflow:report", "running")
    with pytest.raises(WorkflowFailedError, match="cannot gather a"):
        stack.drain()
    run = stack.http.query_ok("workflow-admin:query:get", {"id": started["id"]}, ACME_ADMIN)
    assert (run["state"], run["failed_step"]) == ("failed", "gather")
    assert [step["name"] for step in run["steps"]] == ["gather", "write"]
    [listed] = stack.http.query_ok("workflow-admin:query:runs", {"state": "failed"}, ACME_ADMIN)
    assert listed["id"] == started["id"] and listed["tenant_id"] == "acme"

    # Another tenant's administrator does not find it; the operator tenant's does.
    error = stack.http.write_err("workflow-admin:write:retry", {"id": started["id"]}, GLOBEX_ADMIN)
    assert (error.code, error.reason) == ("not_found", "workflow_run_not_found")
    assert stack.http.query_ok("workflow-admin:query:runs", {}, GLOBEX_ADMIN) == []
    assert len(stack.http.query_ok("workflow-admin:query:runs", {}, OPERATOR)) == 1

    broken.clear()
    retried = stack.http.write_ok("workflow-admin:write:retry", {"id": started["id"]}, OPERATOR)
    assert retried["state"] == "running"
    stack.drain()
    done = stack.http.query_ok("workflow-admin:query:get", {"id": started["id"]}, ACME_ADMIN)
    assert (done["state"], done["result"]) == ("succeeded", "a+b")

    again = stack.http.write_err("workflow-admin:write:retry", {"id": started["id"]}, ACME_ADMIN)
    assert (again.code, again.reason) == ("conflict", "workflow_run_not_failed")


@pytest.mark.parametrize("database", ["sqlite"])
def test_refused_starts_leave_no_run(asanoha_stack: Any, database: str) -> None:
    stack = asanoha_stack(
        features=[_features(set()), workflow_admin.feature], jobs=True, database=database
    )
    triggered = stack.http.write_err(
        "workflow-admin:write:start", {"workflow": "shop:workflow:on-order"}, ACME_ADMIN
    )
    assert (triggered.code, triggered.reason) == ("unprocessable", "workflow_not_manual")
    unknown = stack.http.write_err(
        "workflow-admin:write:start", {"workflow": "shop:workflow:nope"}, ACME_ADMIN
    )
    assert unknown.reason == "workflow_not_found"
    clerk = stack.http.write_err(
        "workflow-admin:write:start", {"workflow": "shop:workflow:report"}, ACME_CLERK
    )
    assert clerk.code == "access_denied"
    assert _runs(stack) == 0
    outbox = stack.tables.outbox
    with stack.db.connect() as conn:
        assert conn.execute(select(func.count()).select_from(outbox)).scalar_one() == 0
    stack.drain()


@pytest.mark.parametrize("database", ["sqlite"])
def test_cancel_over_http_stops_a_running_run(asanoha_stack: Any, database: str) -> None:
    stack = asanoha_stack(
        features=[_features(set()), workflow_admin.feature], jobs=True, database=database
    )
    # Held before its first step runs: the cancel meets a run with a pending step row.
    stack.app.jobs.pause("shop:workflow:report:gather")
    started = stack.http.write_ok(
        "workflow-admin:write:start",
        {"workflow": "shop:workflow:report", "payload": {"name": "x"}},
        ACME_ADMIN,
    )
    cancelled = stack.http.write_ok(
        "workflow-admin:write:cancel", {"id": started["id"]}, ACME_ADMIN
    )
    assert cancelled["state"] == "cancelled"
    stack.app.jobs.resume("shop:workflow:report:gather")
    stack.drain()
    run = stack.app.workflows.get(started["id"])
    assert run.state == "cancelled"
    assert {step.state for step in run.steps.values()} == {"cancelled"}
