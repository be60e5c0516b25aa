"""``App.jobs``: the operations on jobs that the CLI, the bundled job-admin handlers and
application code call: cancel, retry, run, pause, resume, and the kept result of a job.

Each runs in a unit of work of its own, or inside a running write (``within``: a handler's
request), so the rows it writes commit with that write and its messages are published
after it.
"""

from __future__ import annotations

import datetime as dt
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from asanoha.platform.errors import NotFoundError, Reasons, UnprocessableError
from asanoha.platform.jobs.states import CANCELLED, FAILED, SUCCEEDED
from asanoha.platform.model import SessionUser
from asanoha.platform.service import job_pauses
from asanoha.platform.service.job_operations import (
    CancelledJob,
    RetriedJob,
    cancel_job,
    retry_failed_job,
)
from asanoha.platform.service.request import Request

if TYPE_CHECKING:
    from asanoha.platform.service.dispatch import Service


@dataclass(frozen=True)
class PauseChange:
    """What ``pause`` or ``resume`` did: the stored target (a job QN or ``lane:<name>``),
    whether it changed anything, and how many waiting rows a resume made due."""

    target: str
    changed: bool
    woken: int


class JobNotSucceededError(Exception):
    """``app.jobs.result``: the job ended without succeeding (failed for good, or
    cancelled); ``state`` and ``last_error`` say how."""

    def __init__(self, job_id: uuid.UUID, job_qn: str, state: str, last_error: str | None):
        self.job_id, self.job_qn, self.state, self.last_error = job_id, job_qn, state, last_error
        why = (last_error or "").strip().splitlines()[-1:] or ["no error recorded"]
        super().__init__(f"{job_qn} {job_id} ended {state}: {why[0]}")


#: Seconds between two reads of a job row while ``result`` waits for it to end.
RESULT_POLL_SECONDS = 0.05


class Jobs:
    """Job operations on one application's job rows."""

    def __init__(self, service: Service, operator_tenant: str) -> None:
        self._service = service
        #: The tenant of the system user the operations act as when no user is given.
        self._operator_tenant = operator_tenant

    def result(self, job_id: uuid.UUID | str, *, timeout: float | None = None) -> Any:
        """The return value of the job ``job_id`` (declared ``keep_result=True``) once it has
        succeeded, its personal values opened; waits for it to end, at most ``timeout``
        seconds (``None``: as long as it takes), then ``TimeoutError``. Raises
        ``JobNotSucceededError`` when it failed for good or was cancelled, ``ValueError`` for
        a job that keeps no result, ``NotFoundError`` (``job_row_not_found``) for an unknown
        id (or a row the prune has deleted)."""
        row_id = job_id if isinstance(job_id, uuid.UUID) else _job_row_id(str(job_id))
        tables, engine = self._service.tables, self._service.database.engine
        outbox, results = tables.outbox, tables.job_results
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with engine.connect() as conn:
                row = conn.execute(
                    select(outbox.c.job_qn, outbox.c.state, outbox.c.last_error).where(
                        outbox.c.id == row_id
                    )
                ).first()
                if row is None:
                    raise NotFoundError(Reasons.JOB_ROW_NOT_FOUND, id=str(row_id))
                job = self._service.registry.job(row.job_qn)
                if job is None or not job.keep_result:
                    raise ValueError(
                        f"{row.job_qn} keeps no result: declare it with keep_result=True"
                    )
                if row.state == SUCCEEDED:
                    stored = conn.execute(
                        select(results.c.result).where(results.c.job_id == row_id)
                    ).scalar()
                    return self._service.personal.vault(conn).reveal(stored)
                if row.state in (FAILED, CANCELLED):
                    raise JobNotSucceededError(row_id, row.job_qn, row.state, row.last_error)
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"{row.job_qn} {row_id} is still {row.state}")
            time.sleep(RESULT_POLL_SECONDS)

    def cancel(
        self,
        job_id: uuid.UUID,
        *,
        tenant_id: str | None = None,
        within: Request | None = None,
    ) -> CancelledJob:
        """Cancel the job ``job_id``: a pending job never runs; a running attempt is asked
        to stop (``ctx.cancel_requested``, ``ctx.checkpoint()``). With ``tenant_id`` only
        a job of that tenant is found. Raises ``job_row_not_found`` (404) or
        ``job_not_cancellable`` (409, the job has finished)."""
        if within is None:
            with self._service.unit_of_work(self._operator()) as request:
                return self.cancel(job_id, tenant_id=tenant_id, within=request)
        return cancel_job(within, self._service.tables, job_id, tenant_id=tenant_id)

    def retry(
        self,
        job_id: uuid.UUID,
        *,
        requested_by: str,
        tenant_id: str | None = None,
        publish: bool = True,
        within: Request | None = None,
    ) -> RetriedJob:
        """Run a job that failed for good again (see ``job_operations.retry_failed_job``)."""
        if within is None:
            with self._service.unit_of_work(self._operator()) as request:
                return self.retry(
                    job_id,
                    requested_by=requested_by,
                    tenant_id=tenant_id,
                    publish=publish,
                    within=request,
                )
        return retry_failed_job(
            within,
            self._service.tables,
            job_id,
            registry=self._service.registry,
            requested_by=requested_by,
            tenant_id=tenant_id,
            publish=publish,
        )

    def run(
        self,
        job_qn: str,
        payload: dict[str, Any] | None = None,
        *,
        user: SessionUser | None = None,
        delay: float | None = None,
        at: dt.datetime | None = None,
        publish: bool = True,
        priority: int | None = None,
        within: Request | None = None,
    ) -> uuid.UUID:
        """Enqueue the job ``job_qn`` by hand (trigger ``manual``), as ``user`` (default:
        the operator tenant's system user), after ``delay`` seconds or at ``at``. The
        payload is validated against the job's ``schema=`` (``ValidationError``: 400
        ``validation_error`` with the field errors). ``publish=False``: the relay of a
        worker publishes it.

        Every way to start a job by hand comes here (``asanoha jobs run``,
        ``job-admin:write:run``, the console's "Run now"), so one rule holds for all: only a
        job declared ``manual=True`` is started by hand. Raises ``UnprocessableError``
        (422 ``job_not_manual``) for any other, ``NotFoundError`` (404 ``job_not_found``)
        for an unknown job.
        """
        job = self._service.registry.job(job_qn)
        if job is not None and not job.manual:
            # An event-triggered, cron or boot job runs on its trigger, with the payload
            # the trigger gives it; a payload of the caller's choosing could make it do what
            # its trigger never would. A failed run of it may be retried (``retry``): that
            # runs its stored payload and headers again.
            raise UnprocessableError(Reasons.JOB_NOT_MANUAL, job=job_qn, trigger=job.triggers)
        return self._service.enqueue_job(
            job_qn,
            dict(payload or {}),
            user or (within.user if within is not None else self._operator()),
            parent=within,
            delay=delay,
            at=at,
            publish=publish,
            priority=priority,
        )

    def pause(
        self, target: str, *, paused_by: str | None = None, within: Request | None = None
    ) -> PauseChange:
        """Pause a job (its QN), a workflow (its QN: each of its steps) or a lane
        (``worker``, ``api`` or ``lane:<name>``) in every tenant: its rows stay pending, no
        worker claims them and the relay leaves them alone until ``resume``; a running
        attempt runs on. Raises ``LookupError`` naming the jobs and lanes there are when
        ``target`` is none of them."""
        shown, stored = job_pauses.resolve_targets(self._service.registry, target)
        if within is None:
            with self._service.unit_of_work(self._operator()) as request:
                return self.pause(target, paused_by=paused_by, within=request)
        tables = self._service.tables
        changed = [job_pauses.pause(within.conn, tables, each, paused_by) for each in stored]
        return PauseChange(shown, any(changed), 0)

    def resume(self, target: str, *, within: Request | None = None) -> PauseChange:
        """Resume a paused job, workflow or lane: its waiting rows are published at once."""
        shown, stored = job_pauses.resolve_targets(self._service.registry, target)
        if within is None:
            with self._service.unit_of_work(self._operator()) as request:
                return self.resume(target, within=request)
        registry, tables = self._service.registry, self._service.tables
        paused = {pause.target for pause in job_pauses.list_pauses(within.conn, tables)}
        woken = sum(job_pauses.resume(within.conn, tables, registry, each) for each in stored)
        return PauseChange(shown, bool(paused & set(stored)), woken)

    def pauses(self) -> list[job_pauses.Pause]:
        """Every paused job and lane."""
        with self._service.database.connect() as conn:
            return job_pauses.list_pauses(conn, self._service.tables)

    def _operator(self) -> SessionUser:
        return SessionUser.system(self._operator_tenant)


def _job_row_id(text: str) -> uuid.UUID:
    """``text`` as a job row's id (a text that is none: 404 ``job_row_not_found``)."""
    try:
        return uuid.UUID(text)
    except ValueError:
        raise NotFoundError(Reasons.JOB_ROW_NOT_FOUND, id=text) from None
