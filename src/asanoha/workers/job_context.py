"""``JobContext``: what a job sees of its run and the platform."""

from __future__ import annotations

import datetime as dt
import functools
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection

from asanoha.platform.model import JobCancelled, JobDef, SessionUser, Snooze
from asanoha.platform.model.canvas import Canvas
from asanoha.platform.model.place import Place
from asanoha.platform.service import RequestMeta, Service, WriteOrigin, platform_events
from asanoha.platform.service.aggregates import AsOf
from asanoha.platform.service.feature_context import FeatureAccess, FeatureScope
from asanoha.platform.service.outbox import is_cancel_requested
from asanoha.platform.service.request import Acting, Request
from asanoha.platform.store import StoredEvent, read_event
from asanoha.workers.attempt_logs import AttemptLog


class MissingTenantError(ValueError):
    """A job row without a tenant: it is refused, never run as some default tenant."""


class TriggerResultUnavailable(RuntimeError):
    """The triggering write's result was not stored for its jobs (too large, not JSON)."""


@dataclass(frozen=True)
class JobTrigger:
    """What enqueued the job: ``name`` (a write handler QN, ``manual``, ``cron``, a job QN)
    and ``result`` (what the triggering write handler returned, as JSON; else ``None``).
    An event-triggered job reads its event as ``ctx.trigger_event``."""

    name: str | None
    stored_result: Any = None
    #: Why the write's result was not stored, else ``None``.
    result_refused: str | None = None

    @property
    def result(self) -> Any:
        """The triggering write's result; raises ``TriggerResultUnavailable`` when it was
        not stored (the write itself committed)."""
        if self.result_refused:
            raise TriggerResultUnavailable(self.result_refused)
        return self.stored_result


@dataclass(frozen=True)
class JobMeta:
    """Who and what triggered a run: the headers of its job row."""

    tenant_id: str
    triggered_by: str | None = None
    trigger_name: str | None = None
    #: The stored event that triggered the run (event-triggered jobs).
    trigger_event_id: int | None = None
    request_id: str | None = None
    correlation_id: str | None = None
    #: The write chain the job acts for: its limits (public intake, the principal and the
    #: risk of the call that began it) hold in the job too.
    origin: WriteOrigin = field(default_factory=WriteOrigin)
    #: Why the triggering write's result was not stored for the job, else ``None``.
    trigger_result_refused: str | None = None
    #: The W3C trace context of the write that enqueued the job (tracing on), else ``None``.
    traceparent: str | None = None
    #: The locale and time zone the enqueuing write asked for (``ctx.locale``, ``ctx.tz``).
    place: Place = field(default_factory=Place)

    @classmethod
    def from_headers(cls, meta: Mapping[str, Any]) -> JobMeta:
        """Read the headers of a job row; raises ``MissingTenantError`` without a tenant."""
        tenant_id = meta.get("tenant_id")
        if not isinstance(tenant_id, str) or not tenant_id:
            raise MissingTenantError(
                "the job row carries no tenant_id; refused rather than run for a default tenant"
            )
        return cls(
            tenant_id=tenant_id,
            triggered_by=meta.get("triggered_by"),
            trigger_name=meta.get("trigger_name"),
            trigger_event_id=_event_id(meta.get("trigger_event_id")),
            request_id=meta.get("request_id"),
            correlation_id=meta.get("correlation_id"),
            origin=WriteOrigin.from_header(meta.get("origin")),
            trigger_result_refused=meta.get("trigger_result_refused"),
            traceparent=meta.get("traceparent"),
            place=Place.from_header(meta.get("place")),
        )


@functools.cache
def _job_logger(job_qn: str) -> logging.Logger:
    # Looked up once per job: ``getLogger`` takes the logging module's lock on every call.
    return logging.getLogger(f"asanoha.job.{job_qn}")


#: How long a job of a feature switched off in its tenant waits before it looks again.
DISABLED_FEATURE_RECHECK_SECONDS = 60.0


class JobContext(FeatureAccess):
    """The second argument of a job function: the attempt, its trigger, and platform calls.

    Writes go through the service layer like any other caller: ``write`` as the tenant's
    system user (role ``system``, which reaches only handlers that list it), ``write_as`` as
    a given user. Each call outside a running write is its own top-level dispatch, so the
    target handler becomes the entry handler. Every write carries the chain's origin: in a
    chain an agent began below ``high`` the gated operations stay refused (unless the job
    declares ``acts_for_system``), and provenance names the agent, whoever the job writes as.
    """

    def __init__(
        self,
        service: Service,
        job: JobDef,
        meta: JobMeta,
        *,
        task_id: str,
        retries: int,
        trigger_result: Any = None,
    ) -> None:
        self._service = service
        self._trigger_event: StoredEvent | None = None
        self.job = job
        self.meta = meta
        self.task_id = task_id
        #: 1-based number of this attempt.
        self.attempt = retries + 1
        #: Whether a failure now fails the job (no retry left).
        self.final_attempt = retries >= job.retries
        #: What enqueued the job (``ctx.trigger.result``: the triggering write's result).
        self.trigger = JobTrigger(meta.trigger_name, trigger_result, meta.trigger_result_refused)
        self.system_user = SessionUser.system(meta.tenant_id)
        #: Logs as the logger ``asanoha.job.<qn>``; its lines at INFO and above are kept
        #: with the attempt's run row.
        self.log = AttemptLog(
            _job_logger(job.qn), {"job": job.qn, "task_id": task_id, "attempt": self.attempt}
        )
        #: The personal values the attempt saw, with their sealed texts (set when it ends):
        #: a step's or a ``keep_result`` job's result is sealed with them.
        self.carried_values: tuple[dict[str, str], dict[tuple[str, str], str]] | None = None
        #: Whether the job's return value is kept: a ``keep_result`` job's, a declared
        #: step's, and a job's that runs as a step of a canvas (set by its runner).
        self.keeps_result = job.keep_result or job.workflow_step is not None

    @property
    def job_qn(self) -> str:
        """The qualified name of the running job."""
        return self.job.qn

    def _feature_scope(self) -> FeatureScope:
        # Read on a connection of its own: a job's handler runs outside any transaction.
        return FeatureScope(
            self._service.feature_settings,
            self._service.database,
            self.meta.tenant_id,
            self.job.feature,
            None,
            self.meta.place,
        )

    def held_by_feature_switch(self) -> Snooze | None:
        """A ``Snooze`` while the job's feature is switched off in its tenant (the attempt
        runs again, unspent, once the feature is on), else ``None``."""
        settings = self._service.feature_settings
        if self.job.feature not in settings.toggleable:
            return None
        with self._service.database.connect() as conn:
            enabled = settings.is_enabled(conn, self.meta.tenant_id, self.job.feature)
        return None if enabled else Snooze(DISABLED_FEATURE_RECHECK_SECONDS)

    @property
    def tenant_id(self) -> str:
        """The tenant the job runs for."""
        return self.meta.tenant_id

    @property
    def triggered_by(self) -> str | None:
        """Id of the user whose write or dispatch enqueued the job."""
        return self.meta.triggered_by

    @property
    def trigger_name(self) -> str | None:
        """The write handler QN, ``manual``, ``cron`` or the dispatching job's QN."""
        return self.meta.trigger_name

    @property
    def trigger_event(self) -> StoredEvent | None:
        """The stored event for event-triggered jobs (read once), else ``None``."""
        if self.meta.trigger_event_id is None:
            return None
        if self._trigger_event is None:
            with self._service.database.connect() as conn:
                # Its personal values opened (FORGOTTEN once forgotten), as consumers get it.
                self._trigger_event = read_event(
                    conn, self._service.tables, self.meta.trigger_event_id
                )
        return self._trigger_event

    def write(self, qn: str, payload: Any, *, idempotency_key: str | None = None) -> Any:
        """Run the write handler ``qn`` as the tenant's system user. ``idempotency_key``:
        an attempt that runs again (a retry) gets the first attempt's outcome, not a
        second write."""
        return self.write_as(self.system_user, qn, payload, idempotency_key=idempotency_key)

    def write_as(
        self, user: SessionUser, qn: str, payload: Any, *, idempotency_key: str | None = None
    ) -> Any:
        """Run the write handler ``qn`` as ``user``."""
        return self._service.dispatch_write(
            qn,
            payload,
            user,
            parent=self._unit(),
            meta=self._request_meta(),
            origin=self.meta.origin,
            acting=Acting(self.job.qn, self.job.acts_for_system),
            idempotency_key=idempotency_key,
        )

    def query_as(self, user: SessionUser, qn: str, payload: Any) -> Any:
        """Run the query handler ``qn`` as ``user``."""
        return self._service.dispatch_query(
            qn, payload, user, parent=self._read_unit(), meta=self._request_meta()
        )

    def dispatch(
        self,
        job_qn: str,
        payload: dict[str, Any],
        *,
        delay: float | None = None,
        at: dt.datetime | None = None,
        priority: int | None = None,
    ) -> uuid.UUID:
        """Enqueue the job ``job_qn`` (through the outbox) as the tenant's system user;
        its first attempt starts after ``delay`` seconds or at ``at``; ``priority`` (0..9)
        overrides the job's declared one."""
        return self._service.enqueue_job(
            job_qn,
            payload,
            self.system_user,
            parent=self._unit(),
            trigger_name=self.job.qn,
            origin=self.meta.origin,
            delay=delay,
            at=at,
            priority=priority,
        )

    def start_workflow(
        self, workflow_qn: str | Canvas, payload: dict[str, Any] | None = None
    ) -> uuid.UUID:
        """Start a run of the workflow ``workflow_qn`` on ``payload`` as the tenant's system
        user, carrying this job's chain; the run's id."""
        return self._service.start_workflow(
            workflow_qn,
            payload,
            self.system_user,
            parent=self._unit(),
            trigger_name=self.job.qn,
            origin=self.meta.origin,
        )

    def _unit(self) -> Request | None:
        """The unit of work the job's writes run in (``None``: each is its own top-level
        write, as in a job; a workflow step's hold them until its end)."""
        return None

    def _read_unit(self) -> Request | None:
        """The unit of work the job's queries read in (``None``: their own)."""
        return None

    def load(self, aggregate: str, stream_id: str | uuid.UUID, *, as_of: AsOf | None = None) -> Any:
        """The state of aggregate ``aggregate`` (of the job's feature, or ``feature:name``)
        folded from ``stream_id`` of the job's tenant, as ``WriteContext.load`` gives it."""
        with self._service.database.begin() as conn:
            return self._load_in(conn, aggregate, stream_id, as_of)

    def _load_in(
        self, conn: Connection, aggregate: str, stream_id: str | uuid.UUID, as_of: AsOf | None
    ) -> Any:
        aggregates = self._service.aggregates
        found = aggregates.find(aggregate, feature=self.job.feature, caller=self.job.qn)
        return aggregates.load(
            conn, found, tenant_id=self.tenant_id, stream_id=str(stream_id), as_of=as_of
        ).state

    @property
    def cancel_requested(self) -> bool:
        """Whether an operator cancelled this job while it runs (read from its row on each
        call: one query)."""
        with self._service.database.connect() as conn:
            return is_cancel_requested(conn, self._service.tables, uuid.UUID(self.task_id))

    def checkpoint(self) -> None:
        """Raise ``JobCancelled`` when the job was cancelled: call it between steps of a long
        job. The job then ends ``cancelled`` (no retry)."""
        if self.cancel_requested:
            raise JobCancelled(f"{self.job.qn} {self.task_id} was cancelled")

    def progress(self, fraction: float, message: str | None = None) -> None:
        """Report how far the job is (``fraction`` from 0 to 1, a short ``message`` without
        personal data): an ``asanoha:job.progress`` event on the live feed, for the user
        who started the job and the tenant's operators. Committed at once, apart from the
        job's writes."""
        platform_events.append_job_progress(
            self._service.database,
            self._service.tables,
            tenant_id=self.meta.tenant_id,
            job_id=self.task_id,
            job_qn=self.job.qn,
            owner=self.meta.triggered_by,
            fraction=fraction,
            message=message,
        )

    def _request_meta(self) -> RequestMeta:
        # The job's writes (and the jobs they enqueue) keep the place its write asked for.
        return RequestMeta(
            correlation_id=self.meta.correlation_id,
            causation_id=self.task_id,
            locale=self.meta.place.locale,
            zoneinfo=self.meta.place.tz,
        )


def _event_id(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
