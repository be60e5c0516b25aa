"""Enqueueing jobs: the ``enqueue`` step of a write plan, and every other way a job starts.

A job is enqueued by placing its row in the caller's transaction (the outbox), so it exists
exactly when the write that asked for it commits. The rules of placing a row (concurrency
keys, ``unique_for``, debounce) and the clocks of a row belong to ``platform.jobs``; this module builds the row's message (who asked, from which chain, for which
request and trace) and validates what a caller may ask for (the job exists, its payload, its
delay and priority; the workflow or canvas a start names). The write plan's triggered jobs, ``ctx.dispatch``, cron ticks, event
triggers, the job-admin handlers and the CLI all come through here.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import pydantic

from asanoha.platform import telemetry
from asanoha.platform.errors import NotFoundError, Reasons, ValidationError
from asanoha.platform.jobs import enqueue, workflows
from asanoha.platform.model import JobDef, Registry, SessionUser
from asanoha.platform.model.canvas import Canvas, CanvasError, compile_canvas
from asanoha.platform.model.workflows import WorkflowDef, canvas_workflow, stored_canvas
from asanoha.platform.service import outbox
from asanoha.platform.service.outbox import OutboxMessage
from asanoha.platform.service.request import Request
from asanoha.platform.service.trigger_result import StoredTriggerResult
from asanoha.platform.service.validation import check_storable, field_errors, validate_payload
from asanoha.platform.store import Tables


@dataclass(frozen=True)
class JobRequest:
    """A checked request to run a job: the job, its payload as stored, its start delay."""

    job: JobDef
    payload: dict[str, Any]
    countdown: float


class JobEnqueuer:
    """Places job rows in write transactions."""

    def __init__(
        self, registry: Registry, tables: Tables, broker_hold: Callable[[str], float]
    ) -> None:
        self._registry = registry
        self._tables = tables
        #: job qn -> the longest countdown the broker may hold for it; a job delayed longer
        #: waits in its row for the relay.
        self._broker_hold = broker_hold

    def check(
        self,
        job_qn: str,
        payload: dict[str, Any],
        *,
        delay: float | None,
        at: dt.datetime | None,
        manual: bool,
        priority: int | None,
    ) -> JobRequest:
        """What a caller asks for, checked before any transaction: the job exists (404),
        its delay and priority are valid, and (``manual``) its payload matches the job's
        ``schema=`` (400 with the field errors), stored as validated."""
        job = self._registry.job(job_qn)
        if job is None:
            raise NotFoundError(Reasons.JOB_NOT_FOUND, job=job_qn)
        countdown = outbox.start_delay(job_qn, delay, at)
        outbox.check_run_priority(job_qn, job.priority, priority)
        if manual and job.schema is not None:
            model = validate_payload(job.schema, payload, job_qn)
            payload = model.model_dump(mode="json")
        try:
            body = pydantic.TypeAdapter(dict[str, pydantic.JsonValue]).validate_python(payload)
        except pydantic.ValidationError as error:
            raise ValidationError(handler=job_qn, fields=field_errors(error)) from None
        check_storable(body, job_qn)
        return JobRequest(job, body, countdown)

    def check_workflow(
        self, workflow: str | Canvas, payload: dict[str, Any] | None
    ) -> tuple[WorkflowDef, dict[str, Any]]:
        """The workflow a start names and the payload its run keeps: a declared workflow
        (404 ``workflow_not_found``), or a canvas over declared jobs (``model/canvas``; 404
        ``job_not_found``), none of them a workflow's step, its payloads in its jobs."""
        if isinstance(workflow, str):
            declared = self._registry.workflow(workflow)
            if declared is None:
                raise NotFoundError(Reasons.WORKFLOW_NOT_FOUND, workflow=workflow)
            return declared, dict(payload or {})
        if payload:
            raise CanvasError("a canvas carries its payloads in job(qn, payload); pass none")

        def check_job(job_qn: str) -> None:
            job = self._registry.job(job_qn)
            if job is None:
                raise NotFoundError(Reasons.JOB_NOT_FOUND, job=job_qn)
            if job.workflow_step is not None:
                raise CanvasError(
                    f"{job_qn} is a step of {job.workflow_step.workflow_qn}: it runs only in "
                    "that workflow's runs"
                )

        ad_hoc = canvas_workflow(compile_canvas(workflow, check_job))
        return ad_hoc, stored_canvas(ad_hoc)

    def place(
        self,
        request: Request,
        asked: JobRequest,
        user: SessionUser,
        *,
        trigger_name: str,
        idempotency_key: str | None,
        trigger_event_id: int | None,
        publish: bool,
        priority: int | None,
    ) -> uuid.UUID:
        """Place the row of ``asked`` in ``request``'s transaction; its id. A second enqueue
        with the same ``idempotency_key`` places nothing and answers the first row's id."""
        job_qn = asked.job.qn
        if idempotency_key is not None:
            found = outbox.find_enqueued(request.conn, self._tables, idempotency_key)
            if found is not None:
                return found
        message = self.message(
            job_qn, asked.payload, user, request, trigger_name, idempotency_key=idempotency_key
        )
        if trigger_event_id is not None:
            message = dataclasses.replace(
                message, headers={**message.headers, "trigger_event_id": trigger_event_id}
            )
        if priority is not None:
            message = dataclasses.replace(message, priority=priority)
        countdown = asked.countdown
        if countdown > 0 or not publish:
            by_broker = publish and countdown <= self._broker_hold(job_qn)
            message = dataclasses.replace(message, countdown=countdown, by_broker=by_broker)
        return self._place(request, asked.job, message)

    def place_triggered(
        self,
        request: Request,
        jobs: Iterable[JobDef],
        payload: dict[str, Any],
        user: SessionUser,
        handler_qn: str,
        result: StoredTriggerResult,
    ) -> None:
        """The rows of the jobs a write handler's call triggers (its plan's ``enqueue``)."""
        for job in jobs:
            message = self.message(job.qn, payload, user, request, handler_qn, result=result)
            self._place(request, job, message)

    def message(
        self,
        job_qn: str,
        payload: dict[str, Any],
        user: SessionUser,
        request: Request,
        trigger_name: str,
        *,
        result: StoredTriggerResult | None = None,
        idempotency_key: str | None = None,
    ) -> OutboxMessage:
        """The message of a new job row: who asked, from which chain, for which request."""
        headers = {
            "tenant_id": user.tenant_id,
            "triggered_by": user.id,
            "trigger_name": trigger_name,
            "origin": request.origin.to_header(),
            "request_id": request.request_id,
            "correlation_id": request.meta.correlation_id,
            # The job's ctx.locale and ctx.tz: what the write that enqueued it asked for.
            "place": request.meta.place_of(request.user).to_header(),
            # The job's attempts join the trace of the write that enqueued it.
            **telemetry.trace_headers(),
        }
        if result is not None and result.refused:
            headers["trigger_result_refused"] = result.refused
        job = self._registry.job(job_qn)
        return OutboxMessage(
            id=uuid.uuid4(),
            job_qn=job_qn,
            priority=None if job is None else job.priority,
            trigger_result=None if result is None else result.value,
            idempotency_key=idempotency_key,
            payload=payload,
            headers=headers,
        )

    def start_workflow(
        self,
        request: Request,
        workflow: WorkflowDef,
        payload: dict[str, Any],
        user: SessionUser,
        *,
        trigger_name: str,
    ) -> uuid.UUID:
        """Start a run of ``workflow`` on ``payload`` in ``request``'s transaction: the run
        row and its first steps' job rows, which carry the chain's origin like any job row
        (published when the transaction commits); the run's id."""
        try:
            body = pydantic.TypeAdapter(dict[str, pydantic.JsonValue]).validate_python(payload)
        except pydantic.ValidationError as error:
            raise ValidationError(handler=workflow.qn, fields=field_errors(error)) from None
        check_storable(body, workflow.qn)
        headers = self.message(workflow.qn, body, user, request, trigger_name).headers
        run_id, messages = workflows.start_run(request.conn, self._tables, workflow, body, headers)
        request.outbox.extend(messages)
        return run_id

    def _place(self, request: Request, job: JobDef, message: OutboxMessage) -> uuid.UUID:
        placed = enqueue.place(request.conn, self._tables, job, message)
        if placed.message is not None:
            request.outbox.append(placed.message)
        return placed.job_id
