"""One delivery of a job message: claim the attempt, run the job, write how it ended.

The steps, in order: claim (or judge why not: finished or stale -> acknowledge without
running; running past its hard time limit -> a crashed attempt; running within it -> look
again at the limit), read the headers (no tenant -> refused), run the body in a fresh
context, end the attempt on the row (succeeded, a retry scheduled on the row, or failed),
then publish the next attempt when the broker may hold its countdown.
"""

from __future__ import annotations

import contextvars
import datetime as dt
import logging
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal, NoReturn

from celery import Task
from celery.exceptions import Reject, Retry, TimeLimitExceeded
from sqlalchemy.exc import DBAPIError

from asanoha.platform.jobs import workflows
from asanoha.platform.jobs.attempts import (
    AttemptEnd,
    Claim,
    ClaimLimit,
    JobRows,
    JobRowsUnavailable,
    RunStatus,
    Unclaimed,
    WaitingRow,
    describe_error,
    sanitize_error,
)
from asanoha.platform.jobs.states import CANCELLED, FAILED, PENDING, RUNNING, SUCCEEDED
from asanoha.platform.model import JobCancelled, JobDef, Snooze
from asanoha.platform.personal import redaction
from asanoha.platform.personal.vault import carried, carry
from asanoha.platform.service import OutboxMessage, OutboxPublisher, Service
from asanoha.platform.settings import Settings
from asanoha.workers.attempt_span import bind_attempt_log_fields, call_in_attempt_span
from asanoha.workers.ignored_deliveries import ignore_delivery, ignore_unclaimed
from asanoha.workers.job_context import JobContext, JobMeta, MissingTenantError
from asanoha.workers.retry_policy import (
    HARD_LIMIT_GRACE,
    broker_countdown_limit,
    is_retryable,
    job_timeout,
    retry_countdown,
)
from asanoha.workers.step_context import StepContext
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
        #: Writes the ends of attempts whose pool process is gone (``end_killed_attempt``).
        self._lost_ends: ThreadPoolExecutor | None = None
        self._lost_lock = threading.Lock()

    def run(self, task: Task, job: JobDef, attempt: int) -> None:
        """Handle one delivery of ``attempt`` of the job row ``task.request.id``."""
        row_id = uuid.UUID(str(task.request.id))
        claim = self._claim(job, row_id, attempt)
        if (
            not isinstance(claim, Claim)
            and claim.state == PENDING
            and claim.attempt < attempt
            and not claim.waiting
            and not claim.early
        ):
            # Its job is paused: the row waits, unpublished. A resume between the claim and
            # this park found the row still published and left it: so claim once more.
            self._rows.park(row_id, claim.attempt)
            claim = self._claim(job, row_id, attempt)
        if not isinstance(claim, Claim):
            redelivered = bool((task.request.delivery_info or {}).get("redelivered"))
            if claim.state == "missing":
                self._rows.refuse(row_id, job.qn, attempt, "refused: the message has no job row")
                log.error("%s %s: no job row; refused", job.qn, row_id)
            elif claim.state == RUNNING and claim.attempt == attempt:
                self._judge_running(job, row_id, claim, redelivered=redelivered)
            elif claim.early:
                # Its attempt may not start yet (a snooze, a backoff): this is a copy of its
                # message (delivered again, published twice, a look again). The message of
                # its time, or the relay then, runs it (the claim left the row to the relay).
                log.info("%s %s attempt %d: not due yet; acknowledged without running",
                         job.qn, row_id, attempt)  # fmt: skip
            elif claim.state == PENDING and claim.attempt < attempt:
                # Its job is paused, or its key is busy: it waits, unpublished, holding no
                # worker and spending no attempt, until woken or looked at again (a claim
                # under a key's limit left it waiting itself).
                log.info("%s %s attempt %d: waits (job paused or its key busy)", job.qn,
                         row_id, attempt)  # fmt: skip
            else:
                # Finished or a later attempt: the row says the work is done or being done,
                # so this copy is acknowledged unrun.
                log.info(
                    "%s %s attempt %d: row is %s at attempt %d; acknowledged without running",
                    job.qn, row_id, attempt, claim.state, claim.attempt,
                )  # fmt: skip
            ignore_unclaimed(task, claim, attempt)
        try:
            meta = JobMeta.from_headers(claim.headers)
        except Exception as exc:
            # No tenant, or headers that are not an object: no later attempt reads them
            # better, so the job fails now rather than leave the row running.
            error = str(exc) if isinstance(exc, MissingTenantError) else _error_text(exc)
            self._end(job, row_id, None, attempt, claim, AttemptEnd("failed", FAILED, error))
            raise
        # What the attempt logs and the error it fails with are stored without the personal
        # values it was given or read (see ``personal.redaction``).
        with redaction.revealing():
            try:
                wait = self._rate_limit_wait(job, meta)
                start = None if wait > 0 else self._start(job, row_id, attempt, claim, meta)
            except Exception as exc:
                # Whatever fails between the claim and the job's code (the rate limiter, the
                # key service opening its payload) ends the attempt as an error of the job
                # would: a retry or the job's failure. Else the row would stay running, its
                # message acknowledged, until the relay ends it as lost a visibility
                # timeout later.
                self._failed(task, job, row_id, attempt, meta.tenant_id, claim, exc)
                raise
            if start is None:
                # Over its limit: the attempt waits for room in the window, not spent.
                self._schedule_next(
                    job, row_id, meta.tenant_id, attempt, claim, None, wait,
                    status="rate_limited",
                )  # fmt: skip
                log.info("%s %s attempt %d: over its rate limit; runs in %.1f s", job.qn,
                         row_id, attempt, wait)  # fmt: skip
                ignore_delivery(task, f"rate limited: runs in {wait:.1f} s")
            ctx, payload = start
            self._attempt(task, job, row_id, claim, ctx, payload)

    def _rate_limit_wait(self, job: JobDef, meta: JobMeta) -> float:
        """Seconds the attempt must wait for room in its job's rate limit (0: none)."""
        if job.rate_limit is None or self._service.rate_limiter is None:
            return 0.0
        return self._service.rate_limiter.wait_for_job(
            job.qn, job.rate_limit, meta.tenant_id, meta.triggered_by
        )

    def _start(
        self, job: JobDef, row_id: uuid.UUID, attempt: int, claim: Claim, meta: JobMeta
    ) -> tuple[JobContext, dict[str, Any]]:
        """The context of the claimed ``attempt`` and the payload the job runs on."""
        # Personal values are stored sealed: the job gets them opened (or FORGOTTEN).
        personal, engine = self._service.personal, self._service.database.engine
        trigger_result = personal.reveal_detached(engine, claim.trigger_result)
        ctx: JobContext
        if job.workflow_step is not None:
            ctx = StepContext(
                self._service, job, meta, task_id=str(row_id), retries=attempt - 1,
                headers=claim.headers, trigger_result=trigger_result,
            )  # fmt: skip
        else:
            ctx = JobContext(
                self._service,
                job,
                meta,
                task_id=str(row_id),
                retries=attempt - 1,
                trigger_result=trigger_result,
            )
        if workflows.in_a_run(claim.headers):
            # A declared job run as a step of a canvas: its return value is the step's result.
            ctx.keeps_result = True
        bind_attempt_log_fields(ctx)
        payload: dict[str, Any] = personal.reveal_detached(engine, claim.payload)
        return ctx, payload

    def _attempt(
        self,
        task: Task,
        job: JobDef,
        row_id: uuid.UUID,
        claim: Claim,
        ctx: JobContext,
        payload: dict[str, Any],
    ) -> None:
        """Run the claimed attempt of ``ctx`` and end it on the row."""
        try:
            self._attempt_and_end(task, job, row_id, claim, ctx, payload)
        finally:
            # A step's writes commit with its success's end; any other way out drops them.
            if isinstance(ctx, StepContext):
                ctx.writes.rollback()

    def _attempt_and_end(
        self,
        task: Task,
        job: JobDef,
        row_id: uuid.UUID,
        claim: Claim,
        ctx: JobContext,
        payload: dict[str, Any],
    ) -> None:
        try:
            returned = self._call(job, payload, ctx)
        except JobCancelled as exc:
            end = AttemptEnd("cancelled", CANCELLED, _error_text(exc), logs=ctx.log.kept())
            self._end(job, row_id, ctx.tenant_id, ctx.attempt, claim, end)
            log.info("%s %s attempt %d: cancelled", job.qn, row_id, ctx.attempt)
            return
        except Snooze as snooze:
            returned = snooze
        except Exception as exc:
            if isinstance(ctx, StepContext):
                ctx.writes.rollback()
            self._failed(
                task, job, row_id, ctx.attempt, ctx.tenant_id, claim, exc, logs=ctx.log.kept()
            )
            raise
        if isinstance(returned, Snooze):
            if isinstance(ctx, StepContext):
                ctx.writes.rollback()  # the snoozed attempt runs again, writes and all
            self._schedule_next(
                job, row_id, ctx.tenant_id, ctx.attempt, claim, None, returned.seconds,
                status="snoozed", logs=ctx.log.kept(),
            )  # fmt: skip
            return
        if ctx.keeps_result:
            # A workflow step's return value is its result, and so is a keep_result job's
            # (both checked in its span), stored sealed: its end runs carrying the values
            # the attempt saw.
            end = AttemptEnd(
                "succeeded",
                SUCCEEDED,
                logs=ctx.log.kept(),
                result=returned,
                keep_result=job.keep_result,
            )
            sealing = contextvars.Context()
            sealing.run(carry, ctx.carried_values)
            if isinstance(ctx, StepContext) and ctx.writes.opened:
                sealing.run(self._end_with_writes, job, row_id, ctx, claim, end)
            else:
                sealing.run(self._end, job, row_id, ctx.tenant_id, ctx.attempt, claim, end)
            return
        end = AttemptEnd("succeeded", SUCCEEDED, logs=ctx.log.kept())
        self._end(job, row_id, ctx.tenant_id, ctx.attempt, claim, end)

    def _claim(self, job: JobDef, row_id: uuid.UUID, attempt: int) -> Claim | Unclaimed:
        try:
            return self._rows.claim(row_id, attempt, lane=job.lane, limit=ClaimLimit.of(job))
        except JobRowsUnavailable as exc:
            # Nothing ran and nothing is recorded: the message must come back, not be lost
            # with the row left published and pending.
            _give_back(job, row_id, "claiming", exc)

    def _call(self, job: JobDef, payload: dict[str, Any], ctx: JobContext) -> Any:
        # A fresh context: nothing a previous task on this thread left in a ContextVar leaks in.
        context = contextvars.Context()
        # The personal values the attempt was given go with it, so that what it writes on
        # holds them sealed as they were (see ``personal.vault``).
        context.run(carry, carried())
        carry(None)  # and no further: the next attempt on this thread starts without them
        # Its scope too: what it reveals is kept out of its logs and error (see ``run``).
        context.run(redaction.enter, redaction.current())
        try:
            if self.thread_time_limits:
                timeout = job_timeout(job, self._settings)
                return call_with_time_limit(
                    lambda: context.run(call_in_attempt_span, job, payload, ctx), timeout
                )
            return context.run(call_in_attempt_span, job, payload, ctx)
        finally:
            if ctx.keeps_result:
                # The personal values the attempt was given or read: its result's end seals
                # them as its own writes would.
                ctx.carried_values = context.run(carried)

    def _failed(
        self,
        task: Task,
        job: JobDef,
        row_id: uuid.UUID,
        attempt: int,
        tenant_id: str,
        claim: Claim,
        exc: Exception,
        *,
        logs: str | None = None,
    ) -> None:
        """End ``attempt``, failed with ``exc``: a retry on the row, or the job's failure.
        Raises ``Retry`` for a retry so Flower shows the attempt as retried."""
        error = _error_text(exc)
        # Final as ``JobContext.final_attempt`` says: no retry left.
        if attempt > job.retries or not is_retryable(job, exc):
            end = AttemptEnd("failed", FAILED, error, logs=logs)
            self._end(job, row_id, tenant_id, attempt, claim, end)
            return
        countdown = self._schedule_retry(job, row_id, tenant_id, attempt, claim, error, logs=logs)
        raise Retry(exc=exc, when=countdown) from exc

    def _judge_running(
        self, job: JobDef, row_id: uuid.UUID, running: Unclaimed, *, redelivered: bool
    ) -> None:
        """Another delivery of an attempt the row shows running: is that attempt alive?

        A redelivery does not say so. RabbitMQ delivers a message again when the worker's
        connection drops or its ``consumer_timeout`` passes, while the pool process goes on
        running the attempt; Redis and RabbitMQ both do when the whole worker died with it.
        The one sure sign is the attempt's hard time limit: no process runs an attempt past
        it (the prefork pool kills it there; a thread-pool worker ends it at its timeout), so until then this delivery only publishes a copy of
        itself for that moment and is acknowledged, and the attempt, alive, ends as usual;
        past it, the attempt is crashed. Deaths the worker sees itself (a pool process
        killed, the hard limit) are ended at once in its main process (``job_task``)."""
        left = self._may_still_run(job, running)
        if left <= 0:
            self._crashed(job, row_id, running)
            return
        log.info("%s %s: attempt %d may still be running (delivered again: %s); its time "
                 "limit passes in %.1f s", job.qn, row_id, running.attempt, redelivered,
                 left)  # fmt: skip
        # A long wait is cut into steps: the broker holds no delay longer than the retries'.
        countdown = min(left, self._settings.broker_countdown_max)
        message = OutboxMessage(row_id, job.qn, attempt=running.attempt, countdown=countdown)
        try:
            self.publisher.publish(message)
        except Exception as exc:
            # This delivery must come back rather than leave the attempt unwatched.
            _give_back(job, row_id, "scheduling the next look at", exc)

    def _may_still_run(self, job: JobDef, running: Unclaimed) -> float:
        """Seconds until no process can still run the ``running`` attempt (0: none can)."""
        if running.started_at is None:
            return 0.0
        started = running.started_at
        if started.tzinfo is None:
            started = started.replace(tzinfo=dt.UTC)
        limit = job_timeout(job, self._settings) + HARD_LIMIT_GRACE + CLOCK_MARGIN
        elapsed = (dt.datetime.now(dt.UTC) - started).total_seconds()
        return max(0.0, limit - elapsed)

    def _crashed(self, job: JobDef, row_id: uuid.UUID, running: Unclaimed) -> None:
        """An attempt the row shows running past its hard time limit: its worker died
        mid-run. It counts as an attempt; the next one follows as an ordinary retry, or the
        job fails for good."""
        lost = WorkerLostError(
            f"the worker running attempt {running.attempt} was lost (killed, out of memory)"
        )
        log.warning("%s %s: attempt %d crashed with its worker", job.qn, row_id, running.attempt)
        countdown = self._end_crashed(job, row_id, running, lost)
        if countdown is None:
            # Raised so that Flower shows the delivery as failed (it is recorded already).
            raise lost
        raise Retry(exc=lost, when=countdown)

    def end_killed_attempt(
        self, job: JobDef, row_id: uuid.UUID, attempt: int, *, time_limit: bool
    ) -> None:
        """End, as crashed, ``attempt`` of the row ``row_id``, whose pool process exited or
        is killed at its hard time limit (``time_limit``).

        Called in the worker's main process, whose event loop keeps the broker connection
        (heartbeats, acknowledgements): the writes run on a thread of their own, so that a
        database that hangs does not stall it. Nothing waits for them: the message comes
        back meanwhile (see ``job_task``) and is judged by the row, ended or still running.
        """
        with self._lost_lock:
            if self._lost_ends is None:
                self._lost_ends = ThreadPoolExecutor(1, thread_name_prefix="asanoha-lost-attempts")
            self._lost_ends.submit(self._end_killed_attempt, job, row_id, attempt, time_limit)

    def _end_killed_attempt(
        self, job: JobDef, row_id: uuid.UUID, attempt: int, time_limit: bool
    ) -> None:
        try:
            running = self._rows.look(row_id)
            if running.state != RUNNING or running.attempt != attempt:
                return  # it ended after all, or the row has moved on
            limit = job_timeout(job, self._settings) + HARD_LIMIT_GRACE
            lost: Exception = (
                TimeLimitExceeded(
                    f"attempt {attempt} ran past its hard time limit ({limit:g} s); "
                    "its process was killed"
                )
                if time_limit
                else WorkerLostError(
                    f"the pool process running attempt {attempt} exited (killed, out of memory)"
                )
            )
            log.warning("%s %s: attempt %d ended with its process: %s", job.qn, row_id, attempt,
                        lost)  # fmt: skip
            self._end_crashed(job, row_id, running, lost, give_back=False)
        except Exception:
            # The row stays running: the message's redelivery judges it.
            log.warning("%s %s: ending attempt %d, whose process is gone, failed", job.qn,
                        row_id, attempt, exc_info=True)  # fmt: skip

    def _end_crashed(
        self,
        job: JobDef,
        row_id: uuid.UUID,
        running: Unclaimed,
        exc: Exception,
        *,
        give_back: bool = True,
    ) -> float | None:
        """End the ``running`` attempt, whose process is gone, as crashed: the next attempt
        is scheduled (its countdown returned), or the job fails for good (``None``)."""
        headers = running.headers or {}
        tenant = headers.get("tenant_id")
        tenant_id = tenant if isinstance(tenant, str) else None
        error = describe_error(exc)
        started = running.started_at or dt.datetime.now(dt.UTC)
        claim = Claim.of_lost(job.qn, headers, started, running.token)
        attempt = running.attempt
        if attempt > job.retries:
            end = AttemptEnd("failed", FAILED, error)
            self._end(job, row_id, tenant_id, attempt, claim, end, give_back=give_back)
            return None
        return self._schedule_retry(
            job, row_id, tenant_id, attempt, claim, error, status="crashed", give_back=give_back
        )

    def _schedule_retry(
        self,
        job: JobDef,
        row_id: uuid.UUID,
        tenant_id: str | None,
        attempt: int,
        claim: Claim,
        error: str,
        *,
        status: Literal["retrying", "crashed"] = "retrying",
        give_back: bool = True,
        logs: str | None = None,
    ) -> float:
        """Write the next attempt onto the row, then publish it when the broker may hold its
        countdown; a failed publish leaves it due for the relay. Returns the countdown."""
        countdown = retry_countdown(job, attempt)
        return self._schedule_next(
            job, row_id, tenant_id, attempt, claim, error, countdown,
            status=status, give_back=give_back, logs=logs,
        )  # fmt: skip

    def _schedule_next(
        self,
        job: JobDef,
        row_id: uuid.UUID,
        tenant_id: str | None,
        attempt: int,
        claim: Claim,
        error: str | None,
        countdown: float,
        *,
        status: RunStatus,
        give_back: bool = True,
        logs: str | None = None,
    ) -> float:
        """End ``attempt`` with the row pending for a delivery after ``countdown`` seconds:
        the next attempt (a retry), or the same attempt again (``snoozed``: not spent)."""
        by_broker = countdown <= broker_countdown_limit(job, self._settings)
        # Published here: the relay leaves it alone unless this process dies before marking
        # it published. Held in the database: the relay publishes it when it is due.
        spent = status not in ("snoozed", "rate_limited")
        end = AttemptEnd.again_after(
            status, countdown, by_broker=by_broker, error=error, spent=spent, logs=logs
        )
        if not self._end(job, row_id, tenant_id, attempt, claim, end, give_back=give_back):
            return countdown  # another delivery ended this attempt and scheduled the next
        if by_broker:
            next_attempt = attempt + 1 if spent else attempt
            message = OutboxMessage(
                row_id,
                job.qn,
                attempt=next_attempt,
                countdown=countdown,
                row_token=claim.token,
                priority=claim.priority,
            )
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
            self._rows.mark_published(sent, failed)
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
        *,
        give_back: bool = True,
    ) -> bool:
        woken: list[WaitingRow] = []
        try:
            if job.claim_limited:
                ended, woken = self._rows.end_and_wake(row_id, job.qn, tenant_id, attempt,
                                                       claim, end)  # fmt: skip
            else:
                ended = self._rows.end(row_id, job.qn, tenant_id, attempt, claim, end)
        except JobRowsUnavailable as exc:
            if not give_back:
                raise
            # The row still says running: given back, the message comes again as a
            # redelivery, which ends this attempt as crashed (at least once, never lost).
            _give_back(job, row_id, "ending the attempt on", exc)
        self._publish_woken(woken)
        if self._rows.ends_step(claim, end):
            # The steps this end of a step (declared, or of a canvas) started.
            self._publish_started(row_id)
        return ended

    def _end_with_writes(
        self, job: JobDef, row_id: uuid.UUID, ctx: StepContext, claim: Claim, end: AttemptEnd
    ) -> None:
        """End the step's attempt in the unit of work that holds its writes, and commit
        both. When another delivery judged the attempt crashed meanwhile (the end does not
        hold), or the database fails, the writes are rolled back: the attempt that runs
        instead writes them."""
        writes = ctx.writes
        try:
            ended, started = self._rows.end_in(
                writes.conn, row_id, job.qn, ctx.tenant_id, ctx.attempt, claim, end
            )
            if not ended:
                writes.rollback()
                # Its run row is written all the same, as for any end that does not hold.
                self._end(job, row_id, ctx.tenant_id, ctx.attempt, claim, end)
                return
            writes.commit()
        except DBAPIError as exc:
            writes.rollback()
            # The row still says running: given back, the message comes again as a
            # redelivery, which ends this attempt as crashed and runs the step again.
            _give_back(job, row_id, "ending the attempt with its writes on", exc)
        self._rows.stash_started(row_id, started)
        if job.claim_limited:
            self._wake_waiting(job, row_id)
        self._publish_started(row_id)

    def _publish_started(self, row_id: uuid.UUID) -> None:
        """Publish the rows of the workflow steps the end of ``row_id`` started (the relay
        sends those whose publish fails)."""
        sent: list[OutboxMessage] = []
        failed: list[OutboxMessage] = []
        for message in self._rows.take_started(row_id):
            try:
                self.publisher.publish(message)
            except Exception:
                log.warning("%s %s: publishing a started step failed; the relay sends it",
                            message.job_qn, message.id, exc_info=True)  # fmt: skip
                failed.append(message)
            else:
                sent.append(message)
        if sent or failed:
            self._mark_published(sent, failed)

    def _wake_waiting(self, job: JobDef, row_id: uuid.UUID) -> None:
        """Publish the oldest row waiting for a key the ended attempt held (the relay
        publishes it should this fail)."""
        self._publish_woken(self._rows.wake_or_leave_to_relay(row_id, job.qn))

    def _publish_woken(self, woken: list[WaitingRow]) -> None:
        """Publish the rows an end made due; the wake marked them published already, so
        only a failed publish is marked (the relay sends that row)."""
        for row in woken:
            message = OutboxMessage(row.id, row.job_qn, attempt=row.attempt, priority=row.priority)
            try:
                self.publisher.publish(message)
            except Exception:
                log.warning("%s %s: publishing a woken row failed; the relay sends it",
                            row.job_qn, row.id, exc_info=True)  # fmt: skip
                self._mark_published([], [message])


#: Seconds added to an attempt's hard time limit before another delivery takes it for dead:
#: the clock of the worker that claimed it and the judging worker's may differ a little.
CLOCK_MARGIN = 1.0
#: Seconds a worker waits before giving a message back when the database failed: a database
#: that is down would otherwise see the message again at once, over and over.
GIVE_BACK_PAUSE = 1.0


def _error_text(exc: BaseException) -> str:
    """The error text an attempt's end stores: ``describe_error``'s, its message without the
    personal values the attempt revealed."""
    return sanitize_error(redaction.error_text(exc))


def _give_back(job: JobDef, row_id: uuid.UUID, doing: str, exc: Exception) -> NoReturn:
    log.warning("%s %s: %s the job row failed; message given back to the broker", job.qn,
                row_id, doing, exc_info=exc)  # fmt: skip
    time.sleep(GIVE_BACK_PAUSE)
    raise Reject(exc, requeue=True) from exc
