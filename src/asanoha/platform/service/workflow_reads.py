"""A workflow run as its callers read it, and the listing of runs.

A run reads as its state, each step's state, attempts (summed over its items), result or
error and job rows, and the run's result: a mapped step's result is the list of its items'
results in item order, steps come in declaration order, and each step is named by its kind
(a body, a sleep, a wait for an event, an approval). A running run whose every running step
is a sleep, a wait or an approval reads as ``waiting``. Payloads and results are revealed with
a vault on the caller's connection, so inside a write no second connection is taken. A run
of another tenant than the one asked for reads as a missing one (404
``workflow_run_not_found``). ``workflows`` (``App.workflows``) reads through here.
"""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, select

from asanoha.platform.errors import NotFoundError, Reasons
from asanoha.platform.jobs import workflows
from asanoha.platform.jobs.states import RUNNING
from asanoha.platform.jobs.workflows import WAITING
from asanoha.platform.model.workflows import StepDef
from asanoha.platform.personal.vault import PersonalData
from asanoha.platform.store import Tables


@dataclass(frozen=True)
class StepItem:
    """One job row of a step (a mapped step has one per item)."""

    item: int
    job_id: uuid.UUID
    state: str
    attempts: int
    result: Any = None
    error: str | None = None


@dataclass(frozen=True)
class StepRun:
    """A step of a run: its state, attempts (summed over its items), its result (a mapped
    step's: the list of its items' results, in item order) or error, and its items."""

    name: str
    state: str
    attempts: int
    result: Any = None
    error: str | None = None
    items: tuple[StepItem, ...] = ()
    #: ``step`` (a body), ``sleep``, ``wait`` (an event) or ``approval`` (a person).
    kind: str = "step"


@dataclass(frozen=True)
class WorkflowRun:
    """A run as ``app.workflows.get`` reads it."""

    id: uuid.UUID
    workflow: str
    state: str
    steps: dict[str, StepRun] = field(default_factory=dict)
    #: The last step's result (a succeeded run).
    result: Any = None
    error: str | None = None
    failed_step: str | None = None
    failed_item: int | None = None
    created_at: dt.datetime | None = None
    finished_at: dt.datetime | None = None
    #: The tenant of the user who started it.
    tenant_id: str = ""


@dataclass(frozen=True)
class RunSummary:
    """A run as a listing shows it."""

    id: uuid.UUID
    workflow_qn: str
    tenant_id: str
    state: str
    failed_step: str | None
    error: str | None
    created_at: dt.datetime | None
    finished_at: dt.datetime | None


def read_run(
    conn: Connection,
    tables: Tables,
    personal: PersonalData,
    workflow_of: workflows.WorkflowLookup,
    run_id: uuid.UUID,
    tenant_id: str | None,
) -> WorkflowRun:
    """The run ``run_id`` as ``Workflows.get`` answers it, read on ``conn``; 404
    ``workflow_run_not_found``, also for a run of another tenant than ``tenant_id``."""
    items, outbox = tables.workflow_items, tables.outbox
    run = run_row(conn, tables, run_id, tenant_id)
    step_rows = conn.execute(
        select(tables.workflow_steps).where(tables.workflow_steps.c.run_id == run_id)
    ).all()
    item_rows = conn.execute(
        select(items, outbox.c.attempt)
        .join(outbox, outbox.c.id == items.c.job_id, isouter=True)
        .where(items.c.run_id == run_id)
        .order_by(items.c.step, items.c.item)
    ).all()
    # Opened with the same connection: inside a write (a handler) no second one is taken.
    vault = personal.vault(conn)
    workflow = workflows.workflow_of_run(
        workflow_of, run.workflow_qn, lambda: vault.reveal(run.payload)
    )
    by_step: dict[str, list[StepItem]] = {}
    for row in item_rows:
        by_step.setdefault(row.step, []).append(
            StepItem(
                row.item,
                uuid.UUID(str(row.job_id)),
                row.state,
                int(row.attempt or 0),
                vault.reveal(row.result),
                row.error,
            )
        )
    steps: dict[str, StepRun] = {}
    for step_row in step_rows:
        found = by_step.get(step_row.step, [])
        declared = None if workflow is None else workflow.steps.get(step_row.step)
        mapped = declared is not None and declared.map is not None
        results = [item.result for item in found]
        errors = [item.error for item in found if item.error]
        steps[step_row.step] = StepRun(
            step_row.step,
            step_row.state,
            sum(item.attempts for item in found),
            results if mapped else (results[0] if results else None),
            errors[0] if errors else None,
            tuple(found),
            _kind(declared),
        )
    if workflow is not None:
        # In declaration order.
        steps = {name: steps[name] for name in workflow.steps if name in steps}
    result = vault.reveal(run.result)
    vault.carry()
    return WorkflowRun(
        uuid.UUID(str(run.id)),
        run.workflow_qn,
        _run_state(run.state, steps),
        steps,
        result,
        run.error,
        run.failed_step,
        run.failed_item,
        run.created_at,
        run.finished_at,
        run.tenant_id,
    )


def run_row(
    conn: Connection, tables: Tables, run_id: uuid.UUID, tenant_id: str | None = None
) -> Any:
    """The row of the run ``run_id`` (of ``tenant_id``, when given); 404
    ``workflow_run_not_found``."""
    runs = tables.workflow_runs
    row = conn.execute(select(runs).where(runs.c.id == run_id)).first()
    if row is None or (tenant_id is not None and row.tenant_id != tenant_id):
        raise NotFoundError(Reasons.WORKFLOW_RUN_NOT_FOUND, id=str(run_id))
    return row


def list_runs(
    conn: Connection,
    tables: Tables,
    *,
    tenant_id: str | None,
    state: str | None,
    workflow_qn: str | None,
    limit: int,
) -> list[RunSummary]:
    """The newest runs first (of ``tenant_id``, in ``state``, of ``workflow_qn`` when
    given), at most ``limit``, read on ``conn``."""
    runs = tables.workflow_runs
    query = select(
        runs.c.id,
        runs.c.workflow_qn,
        runs.c.tenant_id,
        runs.c.state,
        runs.c.failed_step,
        runs.c.error,
        runs.c.created_at,
        runs.c.finished_at,
    )
    for column, value in (
        (runs.c.tenant_id, tenant_id),
        (runs.c.state, state),
        (runs.c.workflow_qn, workflow_qn),
    ):
        if value is not None:
            query = query.where(column == value)
    query = query.order_by(runs.c.created_at.desc(), runs.c.id).limit(limit)
    rows = conn.execute(query).all()
    return [
        RunSummary(
            uuid.UUID(str(row.id)),
            row.workflow_qn,
            row.tenant_id,
            row.state,
            row.failed_step,
            row.error,
            row.created_at,
            row.finished_at,
        )
        for row in rows
    ]


#: The kinds of step that wait for time, an event or a person rather than run.
WAITING_KINDS = frozenset({"sleep", "wait", "approval"})


def _run_state(stored: str, steps: dict[str, StepRun]) -> str:
    """The run's state as it reads: ``waiting`` for a running run whose every running step
    waits for time, an event or a person (a sleep, a wait, an approval), else as stored."""
    running = [step for step in steps.values() if step.state == RUNNING]
    if stored == RUNNING and running and all(step.kind in WAITING_KINDS for step in running):
        return WAITING
    return stored


def _kind(step: StepDef | None) -> str:
    """What a step is, as a run's reading names it."""
    if step is None:
        return "step"
    if step.hold is not None:
        return step.hold.kind
    return "sleep" if step.sleep is not None else "step"
