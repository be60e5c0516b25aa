"""Workflow runs as handlers for system administrators: start a ``manual=True`` workflow,
list runs, read one, cancel one, retry a failed one, approve a step that waits for it (an
approval step's own ``access=`` says who approves). Add ``workflow_admin.feature`` to an
application's features to expose them (over HTTP and to agents).

They call ``App.workflows``' own functions inside the handler's request, so a run started,
cancelled or retried here commits with the handler's write. A run belongs to the tenant of
the user who started it; another tenant's answers as unknown, except to the operator
tenant (``ASANOHA_OPERATOR_TENANT``), which operates every tenant's runs, as it does jobs.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from typing import Any

from pydantic import BaseModel, Field

from asanoha.handlers.consumer_admin import SYSTEM_ADMIN_ROLE
from asanoha.platform.errors import NotFoundError, Reasons, UnprocessableError
from asanoha.platform.model import Access, Agent, Feature
from asanoha.platform.service import QueryContext, WriteContext
from asanoha.platform.service.handler_context import (
    platform_registry,
    platform_request,
    platform_workflows,
)
from asanoha.platform.service.workflow_reads import RunSummary, WorkflowRun

#: System administrators only: a start or a retry runs steps' effects.
SYSTEM_ADMINS = Access(roles=[SYSTEM_ADMIN_ROLE])
#: Run states a listing filters by.
RUN_STATES = ("running", "succeeded", "failed", "cancelled")

feature = Feature("workflow-admin")


class StartRun(BaseModel):
    """Which workflow to start, on what payload."""

    workflow: str = Field(min_length=1, max_length=200)
    payload: dict[str, Any] = Field(default_factory=dict)


class RunId(BaseModel):
    """Which run."""

    id: uuid.UUID


class RunFilter(BaseModel):
    """Which runs: in a state, of a workflow; the newest first."""

    state: str | None = Field(default=None, pattern="^(running|succeeded|failed|cancelled)$")
    workflow: str | None = Field(default=None, max_length=200)
    limit: int = Field(default=50, ge=1, le=500)


def runs_scope(ctx: QueryContext) -> str | None:
    """The tenant whose runs the caller operates: their own, or every tenant (``None``) for
    the operator tenant."""
    return None if ctx.in_operator_tenant else ctx.tenant_id


@feature.write_handler(
    "start",
    access=SYSTEM_ADMINS,
    agent=Agent(risk="mid"),
    description=(
        "Start a run of a workflow declared manual=True on a payload, as the caller; its "
        "first steps are published when the call commits. Any other workflow answers 422 "
        "workflow_not_manual."
    ),
)
def start(payload: StartRun, ctx: WriteContext) -> dict[str, Any]:
    """Start a run as the caller; its id."""
    workflow = platform_registry(ctx).workflow(payload.workflow)
    if workflow is None:
        raise NotFoundError(Reasons.WORKFLOW_NOT_FOUND, workflow=payload.workflow)
    if not workflow.manual:
        raise UnprocessableError(
            Reasons.WORKFLOW_NOT_MANUAL, workflow=workflow.qn, trigger=workflow.on
        )
    run_id = ctx.start_workflow(workflow.qn, payload.payload)
    return {"id": str(run_id), "workflow": workflow.qn, "state": "running"}


@feature.write_handler(
    "cancel",
    access=SYSTEM_ADMINS,
    agent=Agent(risk="mid"),
    description=(
        "Cancel a running run: its steps not yet started never start, its pending job rows "
        "are cancelled, its running ones asked to stop. A finished run is left as it is."
    ),
)
def cancel(payload: RunId, ctx: WriteContext) -> dict[str, Any]:
    """Cancel a run of the caller's tenant; the run afterwards."""
    run = platform_workflows(ctx).cancel(
        payload.id, tenant_id=runs_scope(ctx), within=platform_request(ctx)
    )
    return run_document(run)


@feature.write_handler(
    "retry",
    access=SYSTEM_ADMINS,
    agent=Agent(risk="mid"),
    description=(
        "Run a failed run again from where it stopped: the items that did not succeed run "
        "again with their full attempt budget, what succeeded stays done. A run that is not "
        "failed answers 409 workflow_run_not_failed."
    ),
)
def retry(payload: RunId, ctx: WriteContext) -> dict[str, Any]:
    """Retry a failed run of the caller's tenant; the run afterwards."""
    run = platform_workflows(ctx).retry(
        payload.id, tenant_id=runs_scope(ctx), within=platform_request(ctx)
    )
    return run_document(run)


class Approval(BaseModel):
    """Which run, and which of its approval steps."""

    id: uuid.UUID
    step: str = Field(min_length=1, max_length=100)


@feature.write_handler(
    "approve",
    access=Access(open_to_all="the approval step's own access= decides who approves"),
    # Not an agent's tool: an agent never approves (the call refuses it on every channel).
    agent=Agent(risk="mid", expose=False),
    description=(
        "Approve an approval step a run waits at, as the caller: the step succeeds and the "
        "steps after it start. The step's access= says who may (without one: system "
        "administrators); an agent never may (403 agent.approver_is_agent). A step the run "
        "has not reached or that was approved already answers 409 workflow_step_not_waiting."
    ),
)
def approve(payload: Approval, ctx: WriteContext) -> dict[str, Any]:
    """Approve a step of a run of the caller's tenant; the run afterwards."""
    run = platform_workflows(ctx).approve(
        payload.id,
        payload.step,
        ctx.user,
        tenant_id=runs_scope(ctx),
        approvers=SYSTEM_ADMINS,
        channel="http",
        within=platform_request(ctx),
    )
    return run_document(run)


@feature.query_handler(
    "get",
    access=SYSTEM_ADMINS,
    description=(
        "A run: its state, each step's state, attempts, result or error and job rows, and "
        "the run's result."
    ),
)
def get(payload: RunId, ctx: QueryContext) -> dict[str, Any]:
    """One run of the caller's tenant."""
    run = platform_workflows(ctx).get(
        payload.id, tenant_id=runs_scope(ctx), within=platform_request(ctx)
    )
    return run_document(run)


@feature.query_handler(
    "runs",
    access=SYSTEM_ADMINS,
    replica=True,
    description="The newest runs of this tenant, by state and workflow when given.",
)
def runs(payload: RunFilter, ctx: QueryContext) -> list[dict[str, Any]]:
    """The newest runs of the caller's tenant."""
    found = platform_workflows(ctx).runs(
        tenant_id=runs_scope(ctx),
        state=payload.state,
        workflow_qn=payload.workflow,
        limit=payload.limit,
        within=platform_request(ctx),
    )
    return [summary_document(run) for run in found]


def run_document(run: WorkflowRun) -> dict[str, Any]:
    """A run as JSON: ids as text, times in ISO 8601."""
    document: dict[str, Any] = _jsonable(dataclasses.asdict(run))
    document["steps"] = list(document["steps"].values())
    return document


def summary_document(run: RunSummary) -> dict[str, Any]:
    """A listed run as JSON."""
    document: dict[str, Any] = _jsonable(dataclasses.asdict(run))
    return document


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(item) for item in value]
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, dt.datetime):
        return value.isoformat()
    return value
