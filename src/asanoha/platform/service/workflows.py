"""``App.workflows``: start a run, cancel it, retry it, approve its approval steps, read it.

The run's rows belong to ``platform/jobs/workflows.py``; this module opens the unit of work
they are written in (the caller's write, or the operator tenant's system user's) and checks
who may do what to a run: an approval step is approved by a person its access (else the
approvers given) admits, never an agent nor the principal of the agent that started the run,
and a run is retried only after it failed (``retry_run``, the one way, ``app.jobs.retry`` of
a step's row included). How a run reads, its results revealed, is ``workflow_reads``'s.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection

from asanoha.platform.errors import (
    AccessDeniedError,
    ConflictError,
    NotFoundError,
    Reasons,
    UnprocessableError,
)
from asanoha.platform.jobs import workflows
from asanoha.platform.jobs.states import FAILED
from asanoha.platform.model import Access, SessionUser
from asanoha.platform.model.canvas import Canvas
from asanoha.platform.service.approvals import record_step_approval
from asanoha.platform.service.request import Request, WriteOrigin
from asanoha.platform.service.workflow_reads import (
    RunSummary,
    WorkflowRun,
    list_runs,
    read_run,
    run_row,
)
from asanoha.platform.store import Tables

if TYPE_CHECKING:
    from asanoha.platform.service.dispatch import Service


class Workflows:
    """Workflow runs of one application."""

    def __init__(self, service: Service, operator_tenant: str) -> None:
        self._service = service
        self._operator_tenant = operator_tenant

    def start(
        self,
        workflow_qn: str | Canvas,
        payload: dict[str, Any] | None = None,
        user: SessionUser | None = None,
        *,
        within: Request | None = None,
    ) -> uuid.UUID:
        """Start a run of ``workflow_qn`` on ``payload`` as ``user`` (default: the operator
        tenant's system user); its id. ``workflow_qn`` may be a canvas over declared jobs
        (``asanoha.chain``, ``group``, ``chord``, ``job``) instead. Inside ``within`` (a
        running write) the run starts with that write's commit. Raises ``NotFoundError``
        (404 ``workflow_not_found``)."""
        acting = user or (
            within.user if within is not None else SessionUser.system(self._operator_tenant)
        )
        return self._service.start_workflow(workflow_qn, payload, acting, parent=within)

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

    def approve(
        self,
        run_id: uuid.UUID | str,
        step: str,
        user: SessionUser,
        *,
        tenant_id: str | None = None,
        approvers: Access | None = None,
        channel: str = "api",
        within: Request | None = None,
        publish: bool = True,
    ) -> WorkflowRun:
        """``user`` approves the approval step ``step`` of the run ``run_id``, which waits
        for it: the step succeeds (its result names the approver and the approval) and the
        steps after it start. The approval is recorded like an agent call's, bound to the
        run and the digest of its payload, and used once. Raises ``AccessDeniedError``
        (403 ``agent.approver_is_agent``) for an agent principal, or the principal of the
        agent that started the run; 403 ``role_required`` for a user the step's
        ``access=`` (without one: ``approvers``, when given) does not admit; ``ConflictError`` (409 ``workflow_step_not_waiting``)
        for a step the run has not reached, that was approved already, or whose run
        ended; 422 ``workflow_step_not_approval``; 404 ``workflow_run_not_found`` (also for a
        run of another tenant than ``tenant_id``, by default the approver's own unless it is
        of the operator tenant), ``workflow_step_not_found``. Returns the run as it stands
        afterwards."""
        run_id = _run_id(run_id)
        service = self._service
        if tenant_id is None and user.tenant_id != self._operator_tenant:
            # A person approves runs of their own tenant (the operator tenant's, any run).
            tenant_id = user.tenant_id
        with self._unit(within) as request:
            run = self._row(request.conn, run_id, tenant_id)
            approve_step(
                request,
                service,
                run,
                step,
                user,
                approvers=approvers,
                channel=channel,
                publish=publish,
            )
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
        with self._connection(within) as conn:
            return list_runs(
                conn,
                self._service.tables,
                tenant_id=tenant_id,
                state=state,
                workflow_qn=workflow_qn,
                limit=limit,
            )

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
        service = self._service
        return read_run(
            conn, service.tables, service.personal, service.registry.workflow, run_id, tenant_id
        )

    def _row(self, conn: Connection, run_id: uuid.UUID, tenant_id: str | None = None) -> Any:
        return run_row(conn, self._service.tables, run_id, tenant_id)


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


def approve_step(
    request: Request,
    service: Service,
    run: Any,
    step: str,
    user: SessionUser,
    *,
    approvers: Access | None,
    channel: str,
    publish: bool,
) -> None:
    """The approval of ``step`` of the run row ``run`` by ``user``, in ``request``'s
    transaction (``Workflows.approve`` says what it checks and raises)."""
    conn, tables = request.conn, service.tables
    vault = service.personal.vault(conn)
    payload = vault.reveal(run.payload)
    workflow = workflows.workflow_of_run(
        service.registry.workflow, run.workflow_qn, lambda: payload
    )
    declared = None if workflow is None else workflow.steps.get(step)
    if declared is None:
        raise NotFoundError(Reasons.WORKFLOW_STEP_NOT_FOUND, workflow=run.workflow_qn, step=step)
    if declared.hold is None or declared.hold.kind != "approval":
        raise UnprocessableError(
            Reasons.WORKFLOW_STEP_NOT_APPROVAL, workflow=run.workflow_qn, step=step
        )
    origin = WriteOrigin.from_header(dict(run.headers).get("origin"))
    # An agent never approves, nor its principal under a token without the agent claim:
    # an approval is a person's consent to what the agent's run does next.
    started_by_agent = origin.principal_kind == "agent" and origin.principal == user.id
    if user.is_agent or started_by_agent:
        raise AccessDeniedError(
            Reasons.AGENT_APPROVER_IS_AGENT,
            handler=declared.qn,
            agent=user.agent or origin.agent_run,
            principal=user.id,
        )
    access = declared.hold.access or approvers
    if access is not None and not access.admits(user):
        raise AccessDeniedError(Reasons.ROLE_REQUIRED, handler=declared.qn, roles=access.describe())
    run_id = uuid.UUID(str(run.id))
    approval_id = record_step_approval(
        conn,
        tables,
        user,
        step_qn=declared.qn,
        run_id=run_id,
        principal=origin.principal or str(dict(run.headers).get("triggered_by") or ""),
        payload=payload,
        channel=channel,
    )
    result = {"approved_by": user.id, "approval_id": str(approval_id)}
    messages = workflows.resolve_held(
        conn, tables, service.registry.workflow, run_id, declared.name, result
    )
    vault.carry()
    if messages is None:
        state = workflows.step_state(conn, tables, run_id, declared.name)
        raise ConflictError(
            Reasons.WORKFLOW_STEP_NOT_WAITING, id=str(run_id), step=step, state=state
        )
    if publish:
        request.outbox.extend(messages)


def _run_id(run_id: uuid.UUID | str) -> uuid.UUID:
    """``run_id`` as a UUID (a text that is none: 404 ``workflow_run_not_found``)."""
    if isinstance(run_id, uuid.UUID):
        return run_id
    try:
        return uuid.UUID(str(run_id))
    except ValueError:
        raise NotFoundError(Reasons.WORKFLOW_RUN_NOT_FOUND, id=str(run_id)) from None
