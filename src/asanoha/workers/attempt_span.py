"""The span and log fields of one job attempt, around the job's function."""

from __future__ import annotations

from typing import Any

from asanoha.platform import telemetry
from asanoha.platform.log_context import bind_log_fields, clear_log_fields
from asanoha.platform.model import JobCancelled, JobDef, Snooze
from asanoha.platform.model.workflows import JobResultError, result_problem
from asanoha.workers.job_context import JobContext
from asanoha.workers.retry_policy import is_retryable


def bind_attempt_log_fields(ctx: JobContext) -> None:
    """Bind the attempt's log fields (job, job id, attempt, tenant, the triggering request's
    ids) in the current context. Left bound after the attempt, so that the worker's own
    lines about how it ended (retry, failure) carry them too; the next task clears them
    (``log_hooks``)."""
    clear_log_fields()
    bind_log_fields(
        job=ctx.job.qn,
        job_id=ctx.task_id,
        attempt=ctx.attempt,
        tenant=ctx.tenant_id,
        request_id=ctx.meta.request_id,
        correlation_id=ctx.meta.correlation_id,
    )


def call_in_attempt_span(job: JobDef, payload: dict[str, Any], ctx: JobContext) -> Any:
    """Run ``job`` on ``payload`` inside the attempt's span, which joins the trace of the
    write that enqueued the job (the row's ``traceparent``), with its log fields bound."""
    bind_attempt_log_fields(ctx)
    span = telemetry.job_attempt_span(
        job.qn, ctx.task_id, ctx.attempt, ctx.final_attempt, ctx.tenant_id, ctx.meta.traceparent
    )
    with span:
        try:
            # A job of a feature switched off in its tenant waits, its attempt unspent.
            held = ctx.held_by_feature_switch()
            returned = held if held is not None else job.func(payload, ctx)
            if ctx.keeps_result and held is None and not isinstance(returned, Snooze):
                problem = result_problem(f"job {job.qn}", returned)
                if problem is not None:
                    raise JobResultError(problem)
        except JobCancelled:
            span.outcome("cancelled")
            raise
        except Snooze:
            span.outcome("snoozed")
            raise
        except Exception as error:
            ends = ctx.final_attempt or not is_retryable(job, error)
            # The class names the failure; its message may quote the payload.
            span.outcome("failed" if ends else "retrying", type(error).__name__)
            raise
        if isinstance(returned, Snooze):
            span.outcome("snoozed")
        return returned
