"""The Celery task of a job: the steps of one attempt, composed in one place."""

from __future__ import annotations

import contextvars
from collections.abc import Mapping
from typing import Any

from celery import Celery, Task

from asanoha.platform.model import JobDef
from asanoha.platform.service import Service
from asanoha.workers.job_context import JobContext, JobMeta
from asanoha.workers.redaction import task_reprs
from asanoha.workers.retry_policy import retry_countdown
from asanoha.workers.run_records import RunRecorder, describe_error

#: Seconds a job over its soft ``timeout`` gets to unwind before the hard limit.
HARD_LIMIT_GRACE = 5.0


def register_job_task(
    celery: Celery,
    service: Service,
    job: JobDef,
    *,
    recorder: RunRecorder,
    personal_keys: frozenset[str],
    default_tenant: str,
) -> Task:
    """Register ``job`` as the task named by its qualified name (``task_routes`` puts it on
    its lane's queue)."""

    @celery.task(  # type: ignore[untyped-decorator]
        name=job.qn,
        bind=True,
        # Not shared: each application's job tasks are bound to its own service and database.
        shared=False,
        max_retries=job.retries,
        acks_late=True,
        reject_on_worker_lost=True,
        ignore_result=True,
        soft_time_limit=job.timeout,
        time_limit=job.timeout + HARD_LIMIT_GRACE if job.timeout else None,
    )
    def run_job(task: Task, payload: dict[str, Any], meta: Mapping[str, Any] | None = None) -> None:
        ctx = JobContext(
            service,
            job,
            JobMeta.from_message(meta or {}, default_tenant),
            task_id=task.request.id,
            retries=task.request.retries,
        )
        run_attempt(task, ctx, payload, meta or {}, recorder, personal_keys)

    task: Task = run_job
    return task


def run_attempt(
    task: Task,
    ctx: JobContext,
    payload: dict[str, Any],
    meta: Mapping[str, Any],
    recorder: RunRecorder,
    personal_keys: frozenset[str],
) -> None:
    """Run one attempt: record it, call the job, then record success, a retry or the failure."""
    job = ctx.job
    run = recorder.start(job.qn, ctx.task_id, ctx.tenant_id, ctx.attempt)
    try:
        # A fresh context: no request context (and so no entry handler) leaks into the job
        # from whatever ran on this worker thread before.
        contextvars.Context().run(job.func, payload, ctx)
    except Exception as exc:
        error = describe_error(exc)
        if ctx.final_attempt:
            recorder.finish(run, "failed", error)
            raise
        # Recorded before the retry is sent, so the next attempt starts at least the
        # countdown after this row's finished_at.
        recorder.finish(run, "retrying", error)
        raise task.retry(
            countdown=retry_countdown(job, ctx.attempt),
            exc=exc,
            **task_reprs(payload, meta, personal_keys),
        ) from exc
    recorder.finish(run, "succeeded")
