"""Operations on job rows: cancel a job, retry a job that failed for good, prune finished
rows, list the newest attempts, the failed jobs and the jobs still to run.

Each runs on the caller's connection (inside its transaction), so the ``asanoha jobs``
command, the bundled job-admin handlers and beat's prune share them.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, Connection, Row, func, insert, select

from asanoha.platform.errors import ConflictError, NotFoundError, Reasons
from asanoha.platform.jobs import clocks, control, enqueue, workflows
from asanoha.platform.jobs.message import OutboxMessage
from asanoha.platform.jobs.retention import prune_finished
from asanoha.platform.jobs.states import CANCELLED, FAILED, PENDING, RUNNING, SUCCEEDED
from asanoha.platform.model import Registry
from asanoha.platform.service import job_pauses
from asanoha.platform.service.request import Request
from asanoha.platform.service.workflows import retry_run
from asanoha.platform.store import Tables
from asanoha.platform.store.backends import backend_for

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
class JobRun:
    """One ended attempt of a job (a row of ``asanoha_job_runs``)."""

    job_qn: str
    task_id: str
    tenant_id: str | None
    attempt: int
    status: str
    error: str | None
    started_at: dt.datetime
    finished_at: dt.datetime | None
    #: What the attempt logged through ``ctx.log`` (INFO and above, bounded).
    logs: str | None = None


@dataclass(frozen=True)
class FailedJob:
    """A job row that failed for good: what a retry would run again."""

    id: uuid.UUID
    job_qn: str
    tenant_id: str | None
    attempt: int
    last_error: str | None
    finished_at: dt.datetime | None


@dataclass(frozen=True)
class PendingJob:
    """A job row still to run (``pending``) or running: where its next attempt stands."""

    id: uuid.UUID
    job_qn: str
    tenant_id: str | None
    state: str
    #: Attempts claimed so far.
    attempt: int
    #: The next attempt may not start before this time.
    not_before: dt.datetime
    #: When its message was last sent to the broker (``None``: not sent yet).
    published_at: dt.datetime | None
    created_at: dt.datetime
    last_error: str | None
    #: The pause that holds it (its job's QN, or ``lane:<name>`` of its lane): no attempt
    #: starts until it is resumed. ``None``: not paused.
    pause: str | None = None


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
    row_tenant = _tenant_of(found.headers) if found is not None else None
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
    row_tenant = _tenant_of(found.headers) if found is not None else None
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
        enqueue.lock_keys(request.conn, [key])
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


def list_job_runs(
    conn: Connection,
    tables: Tables,
    *,
    limit: int,
    failed_only: bool = False,
    tenant_id: str | None = None,
    job_id: uuid.UUID | None = None,
) -> list[JobRun]:
    """The newest ended attempts first; ``failed_only``: attempts that failed for good;
    ``job_id``: the attempts of that job row only."""
    runs = tables.job_runs
    query = select(runs).order_by(runs.c.id.desc()).limit(limit)
    if job_id is not None:
        query = query.where(runs.c.task_id == str(job_id))
    if failed_only:
        query = query.where(runs.c.status == FAILED)
    if tenant_id is not None:
        query = query.where(runs.c.tenant_id == tenant_id)
    return [
        JobRun(
            row.job_qn,
            row.task_id,
            row.tenant_id,
            row.attempt,
            row.status,
            row.error,
            row.started_at,
            row.finished_at,
            row.logs,
        )
        for row in conn.execute(query)
    ]


def list_failed_jobs(
    conn: Connection, tables: Tables, *, limit: int, tenant_id: str | None = None
) -> list[FailedJob]:
    """Job rows that failed for good, the newest failure first: the ids a retry takes."""
    outbox = tables.outbox
    rows = _job_rows(
        conn,
        tables,
        (outbox.c.attempt, outbox.c.last_error, outbox.c.finished_at),
        where=outbox.c.state == FAILED,
        order_by=(outbox.c.finished_at.desc(),),
        limit=limit,
        tenant_id=tenant_id,
    )
    return [
        FailedJob(
            uuid.UUID(str(row.id)),
            row.job_qn,
            _tenant_of(row.headers),
            row.attempt,
            row.last_error,
            row.finished_at,
        )
        for row in rows
    ]


def list_pending_jobs(
    conn: Connection,
    tables: Tables,
    *,
    limit: int,
    lanes: Mapping[str, Sequence[str]],
    tenant_id: str | None = None,
) -> list[PendingJob]:
    """Job rows pending or running, the oldest first: what the workers still have to do,
    each with the pause that holds it (``lanes``: lane -> the QNs of its jobs)."""
    held = job_pauses.pausing_targets(conn, tables, lanes)
    outbox = tables.outbox
    rows = _job_rows(
        conn,
        tables,
        (
            outbox.c.state,
            outbox.c.attempt,
            outbox.c.not_before,
            outbox.c.published_at,
            outbox.c.created_at,
            outbox.c.last_error,
        ),
        where=outbox.c.state.in_((PENDING, RUNNING)),
        order_by=(outbox.c.created_at, outbox.c.id),
        limit=limit,
        tenant_id=tenant_id,
    )
    return [
        PendingJob(
            uuid.UUID(str(row.id)),
            row.job_qn,
            _tenant_of(row.headers),
            row.state,
            row.attempt,
            row.not_before,
            row.published_at,
            row.created_at,
            row.last_error,
            held.get(row.job_qn),
        )
        for row in rows
    ]


def _job_rows(
    conn: Connection,
    tables: Tables,
    columns: Sequence[Any],
    *,
    where: Any,
    order_by: Sequence[Any],
    limit: int,
    tenant_id: str | None,
) -> Sequence[Row[Any]]:
    """Job rows matching ``where`` (of ``tenant_id``, if given): their id, job, headers and
    ``columns``."""
    outbox = tables.outbox
    query = (
        select(outbox.c.id, outbox.c.job_qn, outbox.c.headers, *columns)
        .where(where)
        .order_by(*order_by)
        .limit(limit)
    )
    if tenant_id is not None:
        query = query.where(outbox.c.headers["tenant_id"].as_string() == tenant_id)
    return conn.execute(query).all()


def _tenant_of(headers: Any) -> str | None:
    tenant = headers.get("tenant_id") if isinstance(headers, dict) else None
    return tenant if isinstance(tenant, str) else None


@dataclass(frozen=True)
class JobStateCount:
    """How many job rows of one job are in one state."""

    job_qn: str
    state: str
    count: int


@dataclass(frozen=True)
class JobRow:
    """A job row as an operator lists it: where it stands and how its last attempt ended."""

    id: uuid.UUID
    job_qn: str
    tenant_id: str | None
    state: str
    attempt: int
    not_before: dt.datetime
    created_at: dt.datetime
    finished_at: dt.datetime | None
    last_error: str | None


@dataclass(frozen=True)
class MinuteThroughput:
    """The attempts that ended in one minute: succeeded, and ended by an error."""

    minute: dt.datetime
    succeeded: int
    failed: int


#: Run statuses of attempts that ended by an error (the next attempt follows, or none).
FAILED_RUN_STATUSES = (FAILED, "retrying", "crashed")


def count_jobs_by_state(
    conn: Connection, tables: Tables, *, tenant_id: str | None = None
) -> list[JobStateCount]:
    """How many job rows each job has in each state, by job QN then state."""
    outbox = tables.outbox
    counted: ColumnElement[int] = func.count()
    if tenant_id is not None:
        # Counted in the aggregate, not filtered in WHERE: the database cannot estimate how
        # many rows a tenant has (it lives in the headers), so a WHERE makes Postgres plan for
        # a few hundred rows and sort a tenant's hundred thousand on disk; grouped over the
        # whole table, it counts in a small hash table. The table is read whole either way.
        counted = counted.filter(_tenant_is(tables, tenant_id))
    rows = counted.label("rows")
    query = (
        select(outbox.c.job_qn, outbox.c.state, rows)
        .group_by(outbox.c.job_qn, outbox.c.state)
        .having(rows > 0)
        .order_by(outbox.c.job_qn, outbox.c.state)
    )
    return [JobStateCount(row.job_qn, row.state, row.rows) for row in conn.execute(query)]


def list_jobs(
    conn: Connection,
    tables: Tables,
    *,
    limit: int,
    tenant_id: str | None = None,
    state: str | None = None,
    job_qn: str | None = None,
    job_id: uuid.UUID | None = None,
) -> list[JobRow]:
    """Job rows in any state, the newest first; ``state``, ``job_qn`` and ``job_id`` narrow
    them down."""
    outbox = tables.outbox
    query = (
        select(
            outbox.c.id,
            outbox.c.job_qn,
            outbox.c.headers,
            outbox.c.state,
            outbox.c.attempt,
            outbox.c.not_before,
            outbox.c.created_at,
            outbox.c.finished_at,
            outbox.c.last_error,
        )
        .order_by(outbox.c.created_at.desc(), outbox.c.id.desc())
        .limit(limit)
    )
    if tenant_id is not None:
        query = query.where(_tenant_is(tables, tenant_id))
    if state is not None:
        query = query.where(outbox.c.state == state)
    if job_qn is not None:
        query = query.where(outbox.c.job_qn == job_qn)
    if job_id is not None:
        query = query.where(outbox.c.id == job_id)
    return [
        JobRow(
            uuid.UUID(str(row.id)),
            row.job_qn,
            _tenant_of(row.headers),
            row.state,
            row.attempt,
            row.not_before,
            row.created_at,
            row.finished_at,
            row.last_error,
        )
        for row in conn.execute(query)
    ]


def job_throughput(
    conn: Connection,
    tables: Tables,
    *,
    minutes: int = 60,
    tenant_id: str | None = None,
    now: dt.datetime | None = None,
) -> list[MinuteThroughput]:
    """The attempts that ended in each of the last ``minutes`` minutes (oldest first, every
    minute present): succeeded, and ended by an error (failed for good, retrying, crashed)."""
    end = (now or dt.datetime.now(dt.UTC)).replace(second=0, microsecond=0)
    start = end - dt.timedelta(minutes=minutes - 1)
    runs = tables.job_runs
    # Counted per minute in the database: an hour can hold tens of thousands of attempts.
    minute = backend_for(conn.engine.url).minute_of(runs.c.finished_at).label("minute")
    query = (
        select(minute, runs.c.status, func.count().label("attempts"))
        .where(
            runs.c.finished_at >= start,
            runs.c.status.in_((SUCCEEDED, *FAILED_RUN_STATUSES)),
        )
        .group_by(minute, runs.c.status)
    )
    if tenant_id is not None:
        query = query.where(runs.c.tenant_id == tenant_id)
    succeeded = [0] * minutes
    failed = [0] * minutes
    for row in conn.execute(query):
        at = dt.datetime.fromisoformat(row.minute).replace(tzinfo=dt.UTC)
        slot = int((at - start).total_seconds() // 60)
        if 0 <= slot < minutes:
            (succeeded if row.status == SUCCEEDED else failed)[slot] += row.attempts
    return [
        MinuteThroughput(start + dt.timedelta(minutes=slot), succeeded[slot], failed[slot])
        for slot in range(minutes)
    ]


def _tenant_is(tables: Tables, tenant_id: str) -> Any:
    """The condition that a job row belongs to ``tenant_id`` (the tenant of its headers)."""
    return tables.outbox.c.headers["tenant_id"].as_string() == tenant_id
