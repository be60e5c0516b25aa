"""``App.workflows``: start a run, read it, cancel it, retry it.

The run's rows belong to ``platform/jobs/workflows.py``; this module opens the unit of work
they are written in and reads a run for its callers, its results revealed.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, select

from asanoha.platform.errors import ConflictError, NotFoundError, Reasons
from asanoha.platform.jobs import workflows
from asanoha.platform.jobs.states import FAILED
from asanoha.platform.model import SessionUser
from asanoha.platform.service.request import Request
from asanoha.platform.store import Tables

if TYPE_CHECKING:
    from asanoha.platform.service.dispatch import Service


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


class Workflows:
    """Workflow runs of one application."""

    def __init__(self, service: Service, operator_tenant: str) -> None:
        self._service = service
        self._operator_tenant = operator_tenant

    def start(
        self,
        workflow_qn: str,
        payload: dict[str, Any] | None = None,
        user: SessionUser | None = None,
        *,
        within: Request | None = None,
    ) -> uuid.UUID:
        """Start a run of ``workflow_qn`` on ``payload`` as ``user`` (default: the operator
        tenant's system user); its id. Inside ``within`` (a running write) the run starts
        with that write's commit. Raises ``NotFoundError`` (404 ``workflow_not_found``)."""
        acting = user or (
            within.user if within is not None else SessionUser.system(self._operator_tenant)
        )
        return self._service.start_workflow(workflow_qn, dict(payload or {}), acting, parent=within)

    def cancel(
        self,
        run_id: uuid.UUID | str,
        *,
        tenant_id: str | None = None,
        within: Request | None = None,
    ) -> WorkflowRun:
        """Cancel a running run: its steps not yet started never start, its pending job
        rows are cancelled and its running ones asked to stop (``ctx.cancel_requested``).
        A finished run is left as it is. Returns the run as it stands afterwards. With
        ``tenant_id`` only a run of that tenant is found; inside ``within`` (a running
        write) the cancel commits with it."""
        run_id = _run_id(run_id)
        with self._unit(within) as request:
            self._row(request.conn, run_id, tenant_id)
            workflows.cancel_run(request.conn, self._service.tables, run_id)
            if within is not None:
                return self._read(request.conn, run_id, tenant_id)
        return self.get(run_id)

    def retry(
        self,
        run_id: uuid.UUID | str,
        *,
        tenant_id: str | None = None,
        within: Request | None = None,
        publish: bool = True,
    ) -> WorkflowRun:
        """Run a failed run again from where it stopped: the items of its failed and
        cancelled steps that did not succeed run again (each with its full attempt budget),
        the steps that had not started wait again, what succeeded stays done. Raises
        ``ConflictError`` (409 ``workflow_run_not_failed``) for a run that is running,
        succeeded or cancelled, or whose failure is still stopping an attempt; 404
        ``workflow_run_not_found``. Returns the run as it stands afterwards. Without
        ``publish`` the relay sends its job rows (a process whose broker reaches no worker)."""
        run_id = _run_id(run_id)
        service = self._service
        with self._unit(within) as request:
            self._row(request.conn, run_id, tenant_id)
            retry_run(request, service.tables, service.registry.workflow, run_id, publish=publish)
            if within is not None:
                return self._read(request.conn, run_id, tenant_id)
        return self.get(run_id)

    def get(
        self,
        run_id: uuid.UUID | str,
        *,
        tenant_id: str | None = None,
        within: Request | None = None,
    ) -> WorkflowRun:
        """The run ``run_id``: its state, each step's state, attempts and result or error,
        and the run's result. Raises ``NotFoundError`` (404 ``workflow_run_not_found``), also
        for a run of another tenant than ``tenant_id``, when given."""
        run_id = _run_id(run_id)
        if within is not None:
            return self._read(within.conn, run_id, tenant_id)
        with self._service.database.engine.connect() as conn:
            return self._read(conn, run_id, tenant_id)

    def runs(
        self,
        *,
        tenant_id: str | None = None,
        state: str | None = None,
        workflow_qn: str | None = None,
        limit: int = 50,
        within: Request | None = None,
    ) -> list[RunSummary]:
        """The newest runs first (of ``tenant_id``, in ``state``, of ``workflow_qn`` when
        given), at most ``limit``."""
        runs = self._service.tables.workflow_runs
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
        with self._connection(within) as conn:
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

    @contextlib.contextmanager
    def _unit(self, within: Request | None) -> Iterator[Request]:
        """``within``, or a unit of work of the operator tenant's system user."""
        if within is not None:
            yield within
            return
        with self._service.unit_of_work(SessionUser.system(self._operator_tenant)) as request:
            yield request

    @contextlib.contextmanager
    def _connection(self, within: Request | None) -> Iterator[Connection]:
        if within is not None:
            yield within.conn
            return
        with self._service.database.engine.connect() as conn:
            yield conn

    def _read(self, conn: Connection, run_id: uuid.UUID, tenant_id: str | None) -> WorkflowRun:
        tables = self._service.tables
        items, outbox = tables.workflow_items, tables.outbox
        run = self._row(conn, run_id, tenant_id)
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
        vault = self._service.personal.vault(conn)
        workflow = self._service.registry.workflow(run.workflow_qn)
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
            )
        if workflow is not None:
            # In declaration order.
            steps = {name: steps[name] for name in workflow.steps if name in steps}
        result = vault.reveal(run.result)
        vault.carry()
        return WorkflowRun(
            uuid.UUID(str(run.id)),
            run.workflow_qn,
            run.state,
            steps,
            result,
            run.error,
            run.failed_step,
            run.failed_item,
            run.created_at,
            run.finished_at,
        )

    def _row(self, conn: Connection, run_id: uuid.UUID, tenant_id: str | None = None) -> Any:
        runs = self._service.tables.workflow_runs
        row = conn.execute(select(runs).where(runs.c.id == run_id)).first()
        if row is None or (tenant_id is not None and row.tenant_id != tenant_id):
            raise NotFoundError(Reasons.WORKFLOW_RUN_NOT_FOUND, id=str(run_id))
        return row


def retry_run(
    request: Request,
    tables: Tables,
    workflow_of: workflows.WorkflowLookup,
    run_id: uuid.UUID,
    *,
    publish: bool = True,
) -> None:
    """Reopen the failed run ``run_id`` in ``request``'s transaction; with ``publish`` its
    job rows are published when it commits (else the relay sends them). The one way a run
    is retried: ``Workflows.retry``, and ``app.jobs.retry`` of a step's job row."""
    reopened = workflows.reopen_run(request.conn, tables, workflow_of, run_id, by_broker=publish)
    if reopened.state is None:
        raise NotFoundError(Reasons.WORKFLOW_RUN_NOT_FOUND, id=str(run_id))
    if reopened.state != FAILED or reopened.busy:
        state = "stopping" if reopened.busy else reopened.state
        raise ConflictError(Reasons.WORKFLOW_RUN_NOT_FAILED, id=str(run_id), state=state)
    if publish:
        request.outbox.extend(reopened.messages)


def _run_id(run_id: uuid.UUID | str) -> uuid.UUID:
    """``run_id`` as a UUID (a text that is none: 404 ``workflow_run_not_found``)."""
    if isinstance(run_id, uuid.UUID):
        return run_id
    try:
        return uuid.UUID(str(run_id))
    except ValueError:
        raise NotFoundError(Reasons.WORKFLOW_RUN_NOT_FOUND, id=str(run_id)) from None
