"""The context of a workflow step: a ``JobContext`` with its run, step, item and the results
of the steps before it, whose writes commit with the step's end.

A step's ``write``, ``write_as``, ``dispatch`` and ``start_workflow`` run in one unit of work
(``StepWrites``), opened at the first of them and held until the attempt ends: the attempt's
end is written in it when the step succeeds (``AttemptRunner``), so the writes and the end
commit together; any other end (a failure, a retry, a snooze, a cancel, a worker that dies)
rolls them back. A step whose effects all go through the service layer has its effects once.
Its ``query_as`` reads in the same unit, so it sees the step's own writes.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Mapping
from typing import Any

from sqlalchemy import Connection

from asanoha.platform.jobs import workflows
from asanoha.platform.model import JobDef
from asanoha.platform.service import Service, platform_events
from asanoha.platform.service.aggregates import AsOf
from asanoha.platform.service.request import Acting, Request
from asanoha.workers.job_context import JobContext, JobMeta


class StepWrites:
    """The unit of work of one step attempt's writes: opened at the first, committed or
    rolled back once, by whoever ends the attempt."""

    def __init__(self, service: Service, ctx: JobContext) -> None:
        self._service = service
        self._ctx = ctx
        self._conn: Connection | None = None
        self._request: Request | None = None

    @property
    def opened(self) -> bool:
        """Whether the step wrote (its unit holds a transaction)."""
        return self._request is not None

    @property
    def conn(self) -> Connection:
        """The unit's connection, in its transaction (``opened`` only)."""
        assert self._conn is not None
        return self._conn

    def request(self) -> Request:
        """The unit's request, opened on first use."""
        if self._request is None:
            ctx = self._ctx
            conn = self._service.database.engine.connect()
            conn.begin()
            with self._service.unit_of_work(
                ctx.system_user,
                origin=ctx.meta.origin,
                meta=ctx._request_meta(),
                conn=conn,
                acting=Acting(ctx.job.qn, ctx.job.acts_for_system),
            ) as request:
                self._conn, self._request = conn, request
        return self._request

    def commit(self) -> None:
        """Commit the unit, then publish what it enqueued and tell the commit listeners."""
        if self._request is None or self._conn is None:
            return
        request, conn = self._request, self._conn
        self._request = self._conn = None
        try:
            conn.commit()
        finally:
            conn.close()
        self._service.after_commit(request)

    def rollback(self) -> None:
        """Roll the unit back (nothing it wrote stays); nothing when it is not open."""
        if self._conn is None:
            return
        conn = self._conn
        self._request = self._conn = None
        try:
            conn.rollback()
        finally:
            conn.close()


class StepContext(JobContext):
    """The second argument of a workflow step: everything a ``JobContext`` has, plus
    ``run_id``, ``step`` (its name), ``item`` (the item's index in a mapped step, else
    ``None``) and ``results`` (by step name: the result of every earlier step; a mapped
    step's as the list of its items' results, in item order)."""

    def __init__(
        self,
        service: Service,
        job: JobDef,
        meta: JobMeta,
        *,
        task_id: str,
        retries: int,
        headers: Mapping[str, Any],
        trigger_result: Any = None,
    ) -> None:
        super().__init__(
            service, job, meta, task_id=task_id, retries=retries, trigger_result=trigger_result
        )
        step = job.workflow_step
        self.run_id = uuid.UUID(str(headers[workflows.RUN_HEADER]))
        self.step: str = step.name
        self.item: int | None = (
            int(headers[workflows.ITEM_HEADER]) if step.map is not None else None
        )
        #: The step's writes, committed with its end (see the module).
        self.writes = StepWrites(service, self)

    def _unit(self) -> Request:
        """The step's unit of work: its ``write``, ``write_as``, ``dispatch`` and
        ``start_workflow`` commit with its end, or not at all."""
        return self.writes.request()

    def _read_unit(self) -> Request | None:
        """Once the step wrote, its queries read in its unit (they see those writes)."""
        return self.writes.request() if self.writes.opened else None

    def load(self, aggregate: str, stream_id: str | uuid.UUID, *, as_of: AsOf | None = None) -> Any:
        """As ``JobContext.load``; once the step wrote, in its unit of work (it folds the
        step's own events too, and on SQLite takes no second writer)."""
        if not self.writes.opened:
            return super().load(aggregate, stream_id, as_of=as_of)
        return self._load_in(self.writes.conn, aggregate, stream_id, as_of)

    def progress(self, fraction: float, message: str | None = None) -> None:
        """As ``JobContext.progress``: committed at once. On SQLite, once the step wrote, its
        unit holds the one writer: the progress then commits with the step's end."""
        if not (self.writes.opened and self._service.database.dialect == "sqlite"):
            return super().progress(fraction, message)
        platform_events.append_job_progress(
            self._service.database,
            self._service.tables,
            tenant_id=self.meta.tenant_id,
            job_id=self.task_id,
            job_qn=self.job.qn,
            owner=self.meta.triggered_by,
            fraction=fraction,
            message=message,
            within=self.writes.conn,
        )
        return None

    @functools.cached_property
    def results(self) -> dict[str, Any]:
        """The results of the earlier steps, read when a step first asks (most steps of a
        fan-out never do: each item would read them all)."""
        service = self._service
        workflow = service.registry.workflow(self.job.workflow_step.workflow_qn)
        if workflow is None:
            return {}
        engine = service.database.engine
        with engine.connect() as conn:
            stored = workflows.results_of(
                conn, service.tables, workflow, self.run_id, workflow.earlier(self.step)
            )
        revealed: dict[str, Any] = service.personal.reveal_detached(engine, stored)
        return revealed
