"""One delivery of a job message: claim the attempt, run the job, write how it ended.

The steps, in order: claim (or judge why not: finished or stale -> acknowledge without
running; redelivered while running -> a crashed attempt), read the headers (no tenant ->
refused), run the body in a fresh context, end the attempt on the row (succeeded, a retry
scheduled on the row, or failed), then publish the next attempt when the broker may hold
its countdown.
"""

from __future__ import annotations

import contextvars
import datetime as dt
import logging
import time
import uuid
from collections.abc import Mapping
from typing import Any, NoReturn

from celery import Task
from celery.exceptions import Reject, Retry

from asanoha.platform.model import JobDef
from asanoha.platform.service import OutboxMessage, OutboxPublisher, Service
from asanoha.platform.service.outbox import (
    FAILED,
    PENDING,
    RELAY_GRACE,
    RUNNING,
    SUCCEEDED,
    mark_published,
)
from asanoha.platform.settings import Settings
from asanoha.workers.job_context import JobContext, JobMeta, MissingTenantError
from asanoha.workers.job_rows import (
    AttemptEnd,
    Claim,
    JobRows,
    JobRowsUnavailable,
    describe_error,
    new_claim_token,
)
from asanoha.workers.retry_policy import (
    broker_countdown_limit,
    is_retryable,
    job_timeout,
    retry_countdown,
)
from asanoha.workers.time_limit import call_with_time_limit

log = logging.getLogger("asanoha.jobs")


class WorkerLostError(Exception):
    """The worker running an attempt died (killed, out of memory) before the attempt ended."""


class AttemptRunner:
    """Runs the deliveries of every job of one application."""

    def __init__(
        self,
        service: Service,
        rows: JobRows,
        publisher: OutboxPublisher,
        settings: Settings,
    ) -> None:
        self._service = service
        self._rows = rows
        #: Publishes the next attempt of a retry the broker may hold.
        self.publisher = publisher
        self._settings = settings
        #: Enforce ``timeout`` in this process (a thread-pool worker, where Celery does not).
        self.thread_time_limits = False

    def run(self, task: Task, job: JobDef, attempt: int) -> None:
        """Handle one delivery of ``attempt`` of the job row ``task.request.id``."""
        row_id = uuid.UUID(str(task.request.id))
        try:
            claim = self._rows.claim(row_id, attempt)
        except JobRowsUnavailable as exc:
            # Nothing ran and nothing is recorded: the message must come back, not be lost
            # with the row left published and pending.
            _give_back(job, row_id, "claiming", exc)
        if not isinstance(claim, Claim):
            redelivered = bool((task.request.delivery_info or {}).get("redelivered"))
            if claim.state == "missing":
                self._rows.refuse(row_id, job.qn, attempt, "refused: the message has no job row")
                log.error("%s %s: no job row; refused", job.qn, row_id)
            elif claim.state == RUNNING and claim.attempt == attempt and redelivered:
                self._crashed(job, row_id, attempt, claim.headers or {}, claim.started_at)
            else:
                # Finished, a later attempt, or a second copy of a live attempt: the row says
                # the work is done or being done, so this copy is acknowledged unrun.
                log.info(
                    "%s %s attempt %d: row is %s at attempt %d; acknowledged without running",
                    job.qn, row_id, attempt, claim.state, claim.attempt,
                )  # fmt: skip
            return
        try:
            meta = JobMeta.from_headers(claim.headers)
        except MissingTenantError as exc:
            self._end(job, row_id, None, attempt, claim, AttemptEnd("failed", FAILED, str(exc)))
            raise
        ctx = JobContext(
            self._service,
            job,
            meta,
            task_id=str(row_id),
            retries=attempt - 1,
            trigger_result=claim.trigger_result,
        )
        try:
            self._call(job, claim.payload, ctx)
        except Exception as exc:
            self._failed(task, job, row_id, ctx, claim, exc)
            raise
        self._end(job, row_id, meta.tenant_id, attempt, claim, AttemptEnd("succeeded", SUCCEEDED))

    def _call(self, job: JobDef, payload: dict[str, Any], ctx: JobContext) -> None:
        # A fresh context: nothing a previous task on this thread left in a ContextVar leaks in.
        context = contextvars.Context()
        if self.thread_time_limits:
            timeout = job_timeout(job, self._settings)
            call_with_time_limit(lambda: context.run(job.func, payload, ctx), timeout)
        else:
            context.run(job.func, payload, ctx)

    def _failed(
        self,
        task: Task,
        job: JobDef,
        row_id: uuid.UUID,
        ctx: JobContext,
        claim: Claim,
        exc: Exception,
    ) -> None:
        """End a failed attempt: a retry on the row, or the job's failure. Raises ``Retry``
        for a retry so Flower shows the attempt as retried."""
        error = describe_error(exc)
        if ctx.final_attempt or not is_retryable(job, exc):
            end = AttemptEnd("failed", FAILED, error)
            self._end(job, row_id, ctx.tenant_id, ctx.attempt, claim, end)
            return
        countdown = self._schedule_retry(job, row_id, ctx.tenant_id, ctx.attempt, claim, error)
        raise Retry(exc=exc, when=countdown) from exc

    def _crashed(
        self,
        job: JobDef,
        row_id: uuid.UUID,
        attempt: int,
        headers: Mapping[str, Any],
        started_at: dt.datetime | None,
    ) -> None:
        """A redelivered attempt the row shows running: its worker died mid-run. It counts as
        an attempt; the next one follows as an ordinary retry, or the job fails for good."""
        tenant_id = headers.get("tenant_id") if isinstance(headers.get("tenant_id"), str) else None
        lost = WorkerLostError(
            f"the worker running attempt {attempt} was lost (killed, out of memory)"
        )
        error = describe_error(lost)
        log.warning("%s %s: attempt %d crashed with its worker", job.qn, row_id, attempt)
        # A token of its own: this end, sent again after a lost reply, is recognised as
        # written, and the lost worker's late end is not.
        started = started_at or dt.datetime.now(dt.UTC)
        claim = Claim(job.qn, {}, headers, None, started, new_claim_token())
        if attempt > job.retries:
            self._end(job, row_id, tenant_id, attempt, claim, AttemptEnd("failed", FAILED, error))
            # Raised so that Flower shows the delivery as failed (it is recorded already).
            raise lost
        countdown = self._schedule_retry(
            job, row_id, tenant_id, attempt, claim, error, status="crashed"
        )
        raise Retry(exc=lost, when=countdown)

    def _schedule_retry(
        self,
        job: JobDef,
        row_id: uuid.UUID,
        tenant_id: str | None,
        attempt: int,
        claim: Claim,
        error: str,
        *,
        status: str = "retrying",
    ) -> float:
        """Write the next attempt onto the row, then publish it when the broker may hold its
        countdown; a failed publish leaves it due for the relay. Returns the countdown."""
        countdown = retry_countdown(job, attempt)
        now = dt.datetime.now(dt.UTC)
        not_before = now + dt.timedelta(seconds=countdown)
        by_broker = countdown <= broker_countdown_limit(job, self._settings)
        # Published here: the relay leaves it alone unless this process dies before marking
        # it published. Held in the database: the relay publishes it when it is due.
        relay_after = not_before + dt.timedelta(seconds=RELAY_GRACE) if by_broker else not_before
        end = AttemptEnd(
            "crashed" if status == "crashed" else "retrying",
            PENDING,
            error,
            not_before=not_before,
            relay_after=relay_after,
        )
        if not self._end(job, row_id, tenant_id, attempt, claim, end):
            return countdown  # another delivery ended this attempt and scheduled the next
        if by_broker:
            message = OutboxMessage(row_id, job.qn, attempt=attempt + 1, countdown=countdown)
            try:
                self.publisher.publish(message)
            except Exception:
                log.warning("%s %s: publishing the retry failed; the relay sends it", job.qn,
                            row_id, exc_info=True)  # fmt: skip
                self._mark_published([], [message])
            else:
                self._mark_published([message], [])
        return countdown

    def _mark_published(self, sent: list[OutboxMessage], failed: list[OutboxMessage]) -> None:
        try:
            mark_published(self._service.database, self._service.tables, sent, failed)
        except Exception:
            # The row keeps its relay time: at worst the relay sends a copy, which the claim
            # acknowledges without running.
            log.warning("marking a retry published failed", exc_info=True)

    def _end(
        self,
        job: JobDef,
        row_id: uuid.UUID,
        tenant_id: str | None,
        attempt: int,
        claim: Claim,
        end: AttemptEnd,
    ) -> bool:
        try:
            return self._rows.end(row_id, job.qn, tenant_id, attempt, claim, end)
        except JobRowsUnavailable as exc:
            # The row still says running: given back, the message comes again as a
            # redelivery, which ends this attempt as crashed (at least once, never lost).
            _give_back(job, row_id, "ending the attempt on", exc)


#: Seconds a worker waits before giving a message back when the database failed: a database
#: that is down would otherwise see the message again at once, over and over.
GIVE_BACK_PAUSE = 1.0


def _give_back(job: JobDef, row_id: uuid.UUID, doing: str, exc: Exception) -> NoReturn:
    log.warning("%s %s: %s the job row failed; message given back to the broker", job.qn,
                row_id, doing, exc_info=exc)  # fmt: skip
    time.sleep(GIVE_BACK_PAUSE)
    raise Reject(exc, requeue=True) from exc
