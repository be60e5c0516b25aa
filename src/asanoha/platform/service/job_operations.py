"""Operations on job rows: cancel a job, retry a job that failed for good, prune finished
rows.

Each runs on the caller's connection (inside its transaction), so the ``asanoha jobs``
command, the bundled job-admin handlers and beat's prune share them. A retry of a workflow
step's row is its run's retry (``workflows.retry_run``); a retry of a keyed job is an enqueue
of its key like any other. Listing job rows and their attempts is ``job_listings``'s.
"""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass

from sqlalchemy import Connection, insert, select

from asanoha.platform.errors import ConflictError, NotFoundError, Reasons
from asanoha.platform.jobs import clocks, control, enqueue, key_locks, workflows
from asanoha.platform.jobs.message import OutboxMessage
from asanoha.platform.jobs.retention import prune_finished
from asanoha.platform.jobs.states import CANCELLED, FAILED, PENDING, RUNNING
from asanoha.platform.model import Registry
from asanoha.platform.service.job_listings import tenant_of
from asanoha.platform.service.request import Request
from asanoha.platform.service.workflows import retry_run
from asanoha.platform.store import Tables

#: The run row that records a retry requested by an operator.
REQUEUED = "requeued"


@dataclass(frozen=True)
class RetriedJob:
    """A failed job put back to pending."""

    id: uuid.UUID
    job_qn: str
    tenant_id: str | None
    #: The attempt that failed for good; the retry starts again at attempt 1.
    failed_attempt: int
    #: The error of that attempt.
    last_error: str | None


@dataclass(frozen=True)
class CancelledJob:
    """A job an operator cancelled."""

    id: uuid.UUID
    job_qn: str
    tenant_id: str | None
    #: ``cancelled`` (it was pending: no attempt of it runs) or ``running`` (its running
    #: attempt was asked to stop: ``ctx.cancel_requested``).
    state: str


def cancel_job(
    request: Request, tables: Tables, job_id: uuid.UUID, *, tenant_id: str | None = None
) -> CancelledJob:
    """Cancel the job row ``job_id``: a pending job is cancelled at once, a running one is
    asked to stop (see ``jobs.control.cancel_job_row``). With ``tenant_id`` only a job of that
    tenant is found. Raises ``NotFoundError`` (``job_row_not_found``) for an unknown id,
    ``ConflictError`` (``job_not_cancellable``) for a finished job."""
    outbox = tables.outbox
    found = request.conn.execute(
        select(outbox.c.job_qn, outbox.c.state, outbox.c.headers)
        .where(outbox.c.id == job_id)
        # A worker claiming it at the same moment: the claim waits, then finds it cancelled.
        .with_for_update()
    ).first()
    row_tenant = tenant_of(found.headers) if found is not None else None
    if found is None or (tenant_id is not None and row_tenant != tenant_id):
        raise NotFoundError(Reasons.JOB_ROW_NOT_FOUND, id=str(job_id))
    if found.state not in (PENDING, RUNNING):
        raise ConflictError(
            Reasons.JOB_NOT_CANCELLABLE, id=str(job_id), job=found.job_qn, state=found.state
        )
    state = control.cancel_job_row(request.conn, tables, job_id, found.state)
    if state == CANCELLED:
        # A workflow step's row: its run ends cancelled with it (a running one's does when
        # its attempt ends cancelled).
        workflows.job_row_cancelled(request.conn, tables, job_id)
    return CancelledJob(job_id, found.job_qn, row_tenant, state)


def retry_failed_job(
    request: Request,
    tables: Tables,
    job_id: uuid.UUID,
    *,
    registry: Registry,
    requested_by: str,
    tenant_id: str | None = None,
    publish: bool = True,
) -> RetriedJob:
    """Put the job row ``job_id``, failed for good, back to pending with its full attempt
    budget (``attempt`` 0: it gets every retry its job declares again), on its stored payload
    and headers (tenant, trigger and write origin are kept).

    With ``publish`` the message is published when ``request`` commits (the row waits
    ``RELAY_GRACE`` for that, as a fresh row does); without, the row is due for the relay at
    once. A run row with status ``requeued`` records who asked. With ``tenant_id`` only a job
    of that tenant is found. Raises ``NotFoundError`` (``job_row_not_found``) for an unknown
    id, ``ConflictError`` (``job_not_failed``) for a job that is pending, running or
    succeeded, ``NotFoundError`` (``job_not_found``) for a job ``registry`` no longer
    declares.
    """
    outbox = tables.outbox
    found = request.conn.execute(
        select(
            outbox.c.job_qn,
            outbox.c.state,
            outbox.c.attempt,
            outbox.c.headers,
            outbox.c.last_error,
            outbox.c.concurrency_key,
        )
        .where(outbox.c.id == job_id)
        # Two operators retrying at once: the second waits, then reads the row pending.
        .with_for_update()
    ).first()
    row_tenant = tenant_of(found.headers) if found is not None else None
    if found is None or (tenant_id is not None and row_tenant != tenant_id):
        raise NotFoundError(Reasons.JOB_ROW_NOT_FOUND, id=str(job_id))
    if found.state != FAILED:
        raise ConflictError(
            Reasons.JOB_NOT_FAILED, id=str(job_id), job=found.job_qn, state=found.state
        )
    run_id = (found.headers or {}).get(workflows.RUN_HEADER)
    if run_id is not None:
        # A step's row runs again with its run, or its run would stay failed for a step
        # that then succeeds: the run's retry (which takes this row) is the one way.
        retry_run(request, tables, registry.workflow, uuid.UUID(str(run_id)), publish=publish)
        _record_requeue(
            request, tables, job_id, found.job_qn, found.attempt, row_tenant, requested_by
        )
        return RetriedJob(job_id, found.job_qn, row_tenant, found.attempt, found.last_error)
    job = registry.job(found.job_qn)
    if job is None:
        # No worker runs a job the application no longer declares: put back to pending, the
        # row would wait for ever (its message is dropped as an unregistered task).
        raise NotFoundError(Reasons.JOB_NOT_FOUND, job=found.job_qn, id=str(job_id))
    key = found.concurrency_key
    if key is not None and job.keyed:
        # A retry is an enqueue of the key like any other: ``skip`` and ``unique_for`` answer
        # with the key's live row (the retry would run the key twice), ``replace`` cancels
        # the key's other rows first.
        key_locks.lock_keys(request.conn, [key])
        existing = enqueue.answering_row(request.conn, tables, job, key, other_than=job_id)
        if existing is not None:
            raise ConflictError(
                Reasons.JOB_KEY_TAKEN, id=str(job_id), job=found.job_qn, existing=str(existing)
            )
        if job.concurrency.mode == "replace":
            control.cancel_key(request.conn, tables, key)
    control.retry_failed_row(request.conn, tables, job_id, by_broker=publish, at=clocks.now())
    _record_requeue(request, tables, job_id, found.job_qn, found.attempt, row_tenant, requested_by)
    if publish:
        request.outbox.append(OutboxMessage(id=job_id, job_qn=found.job_qn, attempt=1))
    return RetriedJob(job_id, found.job_qn, row_tenant, found.attempt, found.last_error)


def _record_requeue(
    request: Request,
    tables: Tables,
    job_id: uuid.UUID,
    job_qn: str,
    attempt: int,
    tenant_id: str | None,
    requested_by: str,
) -> None:
    """A run row with status ``requeued``: who asked for the retry of ``job_id``, and when."""
    now = clocks.now()
    request.conn.execute(
        insert(tables.job_runs).values(
            job_qn=job_qn,
            task_id=str(job_id),
            tenant_id=tenant_id,
            attempt=attempt,
            status=REQUEUED,
            error=f"requeued by {requested_by}",
            started_at=now,
            finished_at=now,
        )
    )


def prune_job_rows(conn: Connection, tables: Tables, older_than_days: float) -> int:
    """Delete finished job rows (and run rows) that ended more than ``older_than_days`` ago,
    but the boot jobs' records (see ``jobs.retention.prune_finished``); return how many job rows
    went. Beat runs it hourly with ``ASANOHA_JOB_RETENTION_DAYS``."""
    before = dt.datetime.now(dt.UTC) - dt.timedelta(days=older_than_days)
    return prune_finished(conn, tables, before)
