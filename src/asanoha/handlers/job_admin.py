"""Job operations as handlers for system administrators: cancel a job, retry a job that
failed for good, pause and resume a job or a lane, list the newest attempts, the failed jobs
and the pauses. Add ``job_admin.feature`` to an application's features to expose them (over
HTTP and to agents).

They act on the caller's tenant only: a job belongs to the tenant in its headers, and a job
of another tenant answers as unknown. The operator tenant (``ASANOHA_OPERATOR_TENANT``)
operates the whole application, as it does consumers: its administrators see, cancel and retry
the jobs of every tenant, the platform's own included (cron jobs and boot jobs run as
``ASANOHA_DEFAULT_TENANT``). ``asanoha jobs`` runs the same operations across tenants.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from pydantic import AwareDatetime, BaseModel, Field, model_validator

from asanoha.handlers.consumer_admin import SYSTEM_ADMIN_ROLE, NoPayload
from asanoha.platform.errors import AccessDeniedError, NotFoundError, Reasons
from asanoha.platform.model import Access, Agent, Feature, Registry
from asanoha.platform.service import QueryContext, WriteContext, job_pauses
from asanoha.platform.service.handler_context import (
    platform_jobs,
    platform_registry,
    platform_request,
)
from asanoha.platform.service.job_listings import (
    count_jobs_by_state,
    job_throughput,
    list_failed_jobs,
    list_job_runs,
    list_jobs,
)
from asanoha.platform.store import platform_tables

#: System administrators only: a retry runs a job's effects again.
SYSTEM_ADMINS = Access(roles=[SYSTEM_ADMIN_ROLE])
#: The stream type of the retry events (one stream per job row).
JOB_STREAM_TYPE = "job-admin:job"

feature = Feature("job-admin")


class JobId(BaseModel):
    """Which job: the id of its job row (its Celery task id)."""

    id: uuid.UUID


class RecentRuns(BaseModel):
    """How many of the newest attempts, and whether only attempts that failed for good."""

    limit: int = Field(default=20, ge=1, le=500)
    failed_only: bool = False
    #: Only the attempts of this job row.
    id: uuid.UUID | None = None


class RecentFailures(BaseModel):
    """How many of the newest failed jobs."""

    limit: int = Field(default=20, ge=1, le=500)


class JobRetried(BaseModel):
    """A job that failed for good was put back to pending by an operator."""

    id: str
    job: str
    failed_attempt: int
    last_error: str | None


job_retried = feature.event("job-retried", JobRetried)


class JobCancelRequested(BaseModel):
    """An operator cancelled a job: ``cancelled`` (it was pending) or ``running`` (its
    running attempt was asked to stop)."""

    id: str
    job: str
    state: str


job_cancelled = feature.event("job-cancelled", JobCancelRequested)


@feature.write_handler(
    "cancel",
    access=SYSTEM_ADMINS,
    agent=Agent(risk="mid"),
    description=(
        "Cancel a job: a pending job never runs; a running one is asked to stop and gets no "
        "further attempt. A finished job answers 409 job_not_cancellable."
    ),
)
def cancel(payload: JobId, ctx: WriteContext) -> dict[str, Any]:
    """Cancel a pending or running job of the caller's tenant."""
    cancelled = platform_jobs(ctx).cancel(
        payload.id, tenant_id=jobs_scope(ctx), within=platform_request(ctx)
    )
    ctx.append_event(
        job_cancelled,
        {"id": str(cancelled.id), "job": cancelled.job_qn, "state": cancelled.state},
        stream_id=cancelled.id,
        stream_type=JOB_STREAM_TYPE,
    )
    return {"id": str(cancelled.id), "job": cancelled.job_qn, "state": cancelled.state}


@feature.write_handler(
    "retry",
    access=SYSTEM_ADMINS,
    # Not irreversible (the job row stays, its next run is recorded): mid, as writes are.
    agent=Agent(risk="mid"),
    description=(
        "Run a job that failed for good again from its stored payload, with its full attempt "
        "budget (the attempt count starts again at 0)."
    ),
)
def retry(payload: JobId, ctx: WriteContext) -> dict[str, Any]:
    """Put a failed job of the caller's tenant back to pending; publish it on commit."""
    retried = platform_jobs(ctx).retry(
        payload.id,
        requested_by=ctx.user.id,
        tenant_id=jobs_scope(ctx),
        within=platform_request(ctx),
    )
    ctx.append_event(
        job_retried,
        {
            "id": str(retried.id),
            "job": retried.job_qn,
            "failed_attempt": retried.failed_attempt,
            "last_error": retried.last_error,
        },
        stream_id=retried.id,
        stream_type=JOB_STREAM_TYPE,
    )
    return {
        "id": str(retried.id),
        "job": retried.job_qn,
        "state": "pending",
        "failed_attempt": retried.failed_attempt,
    }


class RunJob(BaseModel):
    """Which job to run by hand, on what payload, and when its first attempt may start."""

    job: str = Field(min_length=1, max_length=200)
    payload: dict[str, Any] = Field(default_factory=dict)
    delay: float | None = Field(default=None, ge=0)
    at: AwareDatetime | None = None

    @model_validator(mode="after")
    def _one_start(self) -> RunJob:
        if self.delay is not None and self.at is not None:
            raise ValueError("pass delay or at, not both")
        return self


@feature.write_handler(
    "run",
    access=SYSTEM_ADMINS,
    agent=Agent(risk="mid"),
    description=(
        "Run a job declared manual=True by hand as the caller, after a delay or at a time; "
        "the payload is validated against the job's schema (400 validation_error with the "
        "field errors). Any other job answers 422 job_not_manual (a failed run of it may be "
        "retried)."
    ),
)
def run(payload: RunJob, ctx: WriteContext) -> dict[str, Any]:
    """Enqueue a job for the caller's tenant; published after the commit."""
    job_id = platform_jobs(ctx).run(
        payload.job,
        payload.payload,
        user=ctx.user,
        delay=payload.delay,
        at=payload.at,
        within=platform_request(ctx),
    )
    return {"id": str(job_id), "job": payload.job, "state": "pending"}


class PauseTarget(BaseModel):
    """A job (its QN) or a lane (``worker``, ``api``, ``lane:<name>``)."""

    target: str = Field(min_length=1, max_length=200)


class JobsPaused(BaseModel):
    """An operator paused or resumed a job or a lane."""

    target: str
    paused: bool


jobs_paused = feature.event("jobs-paused", JobsPaused)
#: The stream of the pause events (one stream per application).
PAUSE_STREAM_TYPE = "job-admin:pauses"


def _pause_change(ctx: WriteContext, target: str, *, paused: bool) -> dict[str, Any]:
    """Pause or resume ``target`` for every tenant: for the operator tenant only."""
    if not ctx.in_operator_tenant:
        raise AccessDeniedError(Reasons.OPERATOR_REQUIRED, handler=ctx.handler.qn)
    jobs = platform_jobs(ctx)
    try:
        if paused:
            change = jobs.pause(target, paused_by=ctx.user.id, within=platform_request(ctx))
        else:
            change = jobs.resume(target, within=platform_request(ctx))
    except LookupError:
        raise NotFoundError(Reasons.JOB_NOT_FOUND, job=target) from None
    if change.changed:
        ctx.append_event(
            jobs_paused,
            {"target": change.target, "paused": paused},
            stream_id=uuid.uuid5(uuid.NAMESPACE_URL, f"asanoha:pauses:{change.target}"),
            stream_type=PAUSE_STREAM_TYPE,
        )
    return {"target": change.target, "paused": paused, "changed": change.changed,
            "woken": change.woken}  # fmt: skip


@feature.write_handler(
    "pause",
    access=SYSTEM_ADMINS,
    agent=Agent(risk="mid"),
    description=(
        "Pause a job or a lane in every tenant (operator tenant only): its jobs stay pending, "
        "no worker runs them, until resumed; running attempts run on."
    ),
)
def pause(payload: PauseTarget, ctx: WriteContext) -> dict[str, Any]:
    """Pause a job or a lane."""
    return _pause_change(ctx, payload.target, paused=True)


@feature.write_handler(
    "resume",
    access=SYSTEM_ADMINS,
    agent=Agent(risk="mid"),
    description="Resume a paused job or lane (operator tenant only): its waiting jobs run.",
)
def resume(payload: PauseTarget, ctx: WriteContext) -> dict[str, Any]:
    """Resume a job or a lane."""
    return _pause_change(ctx, payload.target, paused=False)


@feature.query_handler(
    "pauses",
    access=SYSTEM_ADMINS,
    replica=True,
    description=(
        "The paused jobs and lanes (when, and by whom for the operator tenant), and each "
        "job they hold with the pause that holds it: its own or its lane's."
    ),
)
def pauses(payload: NoPayload, ctx: QueryContext) -> dict[str, Any]:
    """The pauses, and the jobs they hold (every tenant's rows of those jobs wait)."""
    conn, tables = platform_request(ctx).conn, platform_tables()
    lanes = job_pauses.lanes_of(platform_registry(ctx))
    return {
        "pauses": [
            {
                "target": pause.target,
                "paused_at": _iso(pause.paused_at),
                # Who paused is an operator's name: for the operator tenant only.
                "paused_by": pause.paused_by if ctx.in_operator_tenant else None,
            }
            for pause in job_pauses.list_pauses(conn, tables)
        ],
        "held": job_pauses.pausing_targets(conn, tables, lanes),
    }


@feature.query_handler(
    "runs",
    access=SYSTEM_ADMINS,
    replica=True,
    description=(
        "The newest job attempts of this tenant (or of one job, by id): job, task id, "
        "attempt, status, error and the lines the attempt logged."
    ),
)
def runs(payload: RecentRuns, ctx: QueryContext) -> list[dict[str, Any]]:
    """The newest ended attempts of the caller's tenant."""
    found = list_job_runs(
        platform_request(ctx).conn,
        platform_tables(),
        limit=payload.limit,
        failed_only=payload.failed_only,
        tenant_id=jobs_scope(ctx),
        job_id=payload.id,
    )
    return [
        {
            "job": run.job_qn,
            "task_id": run.task_id,
            "attempt": run.attempt,
            "status": run.status,
            "error": run.error,
            "started_at": _iso(run.started_at),
            "finished_at": _iso(run.finished_at),
            "logs": run.logs,
        }
        for run in found
    ]


@feature.query_handler(
    "failed",
    access=SYSTEM_ADMINS,
    replica=True,
    description="Jobs of this tenant that failed for good, newest first, with their last error.",
)
def failed(payload: RecentFailures, ctx: QueryContext) -> list[dict[str, Any]]:
    """The failed jobs of the caller's tenant: the ids ``job-admin:write:retry`` takes."""
    found = list_failed_jobs(
        platform_request(ctx).conn,
        platform_tables(),
        limit=payload.limit,
        tenant_id=jobs_scope(ctx),
    )
    return [
        {
            "id": str(job.id),
            "job": job.job_qn,
            "attempt": job.attempt,
            "last_error": job.last_error,
            "finished_at": _iso(job.finished_at),
        }
        for job in found
    ]


def jobs_scope(ctx: QueryContext) -> str | None:
    """The tenant whose jobs the caller operates: their own, or every tenant (``None``) for
    the operator tenant."""
    return None if ctx.in_operator_tenant else ctx.tenant_id


def _iso(moment: dt.datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


class JobFilter(BaseModel):
    """Which job rows: in a state, of a job, or one row by id; the newest first."""

    state: str | None = Field(default=None, max_length=16)
    job: str | None = Field(default=None, max_length=200)
    id: uuid.UUID | None = None
    limit: int = Field(default=50, ge=1, le=500)


class SummaryWindow(BaseModel):
    """How many minutes of throughput, up to now."""

    minutes: int = Field(default=60, ge=1, le=24 * 60)


@feature.query_handler(
    "jobs",
    access=SYSTEM_ADMINS,
    replica=True,
    description=(
        "Job rows of this tenant in any state, newest first, filtered by state, job or id: "
        "state, attempt, not_before and last error."
    ),
)
def jobs(payload: JobFilter, ctx: QueryContext) -> list[dict[str, Any]]:
    """The job rows of the caller's tenant that match the filter."""
    found = list_jobs(
        platform_request(ctx).conn,
        platform_tables(),
        limit=payload.limit,
        tenant_id=jobs_scope(ctx),
        state=payload.state,
        job_qn=payload.job,
        job_id=payload.id,
    )
    return [
        {
            "id": str(row.id),
            "job": row.job_qn,
            "tenant": row.tenant_id,
            "state": row.state,
            "attempt": row.attempt,
            "not_before": _iso(row.not_before),
            "created_at": _iso(row.created_at),
            "finished_at": _iso(row.finished_at),
            "last_error": row.last_error,
        }
        for row in found
    ]


@feature.query_handler(
    "summary",
    access=SYSTEM_ADMINS,
    replica=True,
    description=(
        "This tenant's job rows counted by job, lane and state, and the attempts that "
        "succeeded or failed in each minute of the last hour (or ``minutes``)."
    ),
)
def summary(payload: SummaryWindow, ctx: QueryContext) -> dict[str, Any]:
    """Counts by job, lane and state, and throughput per minute, of the caller's tenant."""
    conn, tables = platform_request(ctx).conn, platform_tables()
    registry = platform_registry(ctx)
    counts = count_jobs_by_state(conn, tables, tenant_id=jobs_scope(ctx))
    throughput = job_throughput(conn, tables, minutes=payload.minutes, tenant_id=jobs_scope(ctx))
    return {
        "counts": [
            {
                "job": count.job_qn,
                "lane": _lane_of(registry, count.job_qn),
                "state": count.state,
                "count": count.count,
            }
            for count in counts
        ],
        "throughput": [
            {"minute": _iso(slot.minute), "succeeded": slot.succeeded, "failed": slot.failed}
            for slot in throughput
        ],
    }


def _lane_of(registry: Registry, job_qn: str) -> str | None:
    """The lane a job runs on; ``None`` for a job the application no longer declares."""
    job = registry.job(job_qn)
    return None if job is None else job.lane
