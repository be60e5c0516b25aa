"""Listings of job rows and their attempts: the newest attempts, the failed jobs, the jobs
still to run, counts by state, job rows by state and job, and attempts ended per minute.

Read-only, each on the caller's connection, so the ``asanoha jobs`` command, the bundled
job-admin handlers and the console share them. The tenant of a job row is the one its
headers name (``tenant_of``): a listing for a tenant shows only its rows. What changes a job
row (cancel, retry, prune) is ``job_operations``'s.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, Connection, Row, func, select

from asanoha.platform.jobs.states import FAILED, PENDING, RUNNING, SUCCEEDED
from asanoha.platform.service import job_pauses
from asanoha.platform.store import Tables
from asanoha.platform.store.backends import backend_for


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
            tenant_of(row.headers),
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
            tenant_of(row.headers),
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


def tenant_of(headers: Any) -> str | None:
    """The tenant a job row's ``headers`` name (``None``: none)."""
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
            tenant_of(row.headers),
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
