"""The write pipeline: how every write runs its handler's plan, in one place, top to bottom.

Every way into a write comes here: ``write`` without a parent (an HTTP write, an MCP tool
call, a console action through a bundled handler, ``app.write``), ``write`` with a parent (a
handler's, job's or consumer's ``ctx.write``/``write_as``: a savepoint of the parent's
transaction, whose entry handler and origin it keeps), and ``batch`` (each item its own entry
handler, one transaction). Each runs the steps of its handler's ``WritePlan``
(``write_plan``), in this order:

    observed (span, log fields)                         service/observed.py
      admit: handler, access, payload                   service/admission.py
      rate_limit (top level, when planned)              service/rate_limits.py
      idempotency: hold the key, answer a kept outcome  service/keyed_writes.py
        transaction; open the request (entry, origin)   service/admission.py
        approval (an agent's call, when planned)        service/approvals.py
        handler -> entity executor per verb             service/executor.py
          (gates, transitions, field access, sealing,   service/gates.py, personal/
           append and project)                          store/
          domain events                                 service/domain_events.py
        enqueue triggered jobs (when planned)           service/job_enqueue.py
      commit; outcome kept under the key                service/keyed_writes.py
      committed: count, publish, listeners, hooks       never fails the answered write

A step owns its rule; nothing here re-implements one. What is not in a handler's plan is not
run (and not decided) at all.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import pydantic
from sqlalchemy import Connection
from sqlalchemy.exc import DataError

from asanoha.platform import telemetry
from asanoha.platform.errors import AsanohaError, Reasons, UnprocessableError
from asanoha.platform.metrics import count_failed_write, count_write
from asanoha.platform.model import HandlerDef, Registry, SessionUser
from asanoha.platform.service import gates, idempotency
from asanoha.platform.service.admission import Admission, open_request
from asanoha.platform.service.approvals import Approvals
from asanoha.platform.service.canonical import payload_digest
from asanoha.platform.service.handler_context import WriteContext
from asanoha.platform.service.instruction_reads import InstructionReads
from asanoha.platform.service.job_enqueue import JobEnqueuer
from asanoha.platform.service.keyed_writes import KeyedWrites
from asanoha.platform.service.observed import note_entry, observed
from asanoha.platform.service.request import Acting, Request, RequestMeta, WriteOrigin
from asanoha.platform.service.secret_guard import run_guarded
from asanoha.platform.service.trigger_result import storable_trigger_result
from asanoha.platform.service.write_plan import WritePlan, build_write_plan
from asanoha.platform.store import Database

log = logging.getLogger("asanoha.service")

#: Makes the context a handler is called with, for a request, handler and caller.
ContextFactory = Callable[[Request, HandlerDef, SessionUser], WriteContext]


class WritePipeline:
    """Runs writes: the plan of each handler over one ``Request``."""

    def __init__(
        self,
        *,
        registry: Registry,
        database: Database,
        admission: Admission,
        keyed: KeyedWrites,
        approvals: Approvals,
        jobs: JobEnqueuer,
        context: ContextFactory,
        after_commit: Callable[[Request], None],
    ) -> None:
        self._registry = registry
        self._database = database
        self._admission = admission
        self._keyed = keyed
        self._approvals = approvals
        self._jobs = jobs
        self._context = context
        self._after_commit = after_commit
        self._plans: dict[str, WritePlan] = {}
        # Every write handler's plan is made now, when the application starts: a plan that
        # cannot be made fails the start, not a call.
        for declared in registry.handlers:
            if declared.kind == "write":
                self.plan_of(declared)

    def write(
        self,
        qn: str,
        payload: Any,
        user: SessionUser,
        *,
        parent: Request | None = None,
        meta: RequestMeta | None = None,
        origin: WriteOrigin | None = None,
        acting: Acting | None = None,
        approval: str | None = None,
        reads: InstructionReads | None = None,
        idempotency_key: str | None = None,
        replay: idempotency.Replay | None = None,
    ) -> Any:
        """Run the write handler ``qn`` for ``user`` and return its data.

        Without ``parent`` it is a top-level write in its own transaction, and the handler is
        the entry handler; ``origin`` (jobs, consumers) is the write that triggered the caller
        and ``acting`` the job or consumer that dispatches it. With ``parent`` it runs in a
        savepoint of the parent's transaction and keeps the parent's entry handler, origin and
        collector. ``approval`` is a human's approval token, which an agent principal needs
        for a high-risk handler (a nested write never asks: its entry handler decides the
        gates). ``reads`` collects the instruction fields the call reads and returns.

        With ``idempotency_key`` the first outcome (data or a 4xx refusal) is stored under
        the key in the write's transaction, and a repeat with the same payload answers it
        again without writing (``replay.replayed`` tells the caller); see ``idempotency``.
        """
        if idempotency_key is not None:
            idempotency_key = idempotency.check_key(idempotency_key)
        if parent is not None:
            gates.check_write_allowed(parent, "write", qn)
            handler, model = self._admission.admit(
                qn, "write", payload, user, parent.conn, nested=True
            )
            key = idempotency.key_of(
                idempotency_key,
                handler.qn,
                user,
                lambda: payload_digest(model),
                answer_once=handler.answer_once,
            )
            return self._run_nested(parent, handler, model, user, key, replay)
        meta = meta or RequestMeta()
        with observed("write", qn, user, meta) as span:
            return self._dispatch_top_write(
                qn, payload, user, meta, origin, acting, approval, reads, idempotency_key,
                replay, span,
            )  # fmt: skip

    def _dispatch_top_write(
        self,
        qn: str,
        payload: Any,
        user: SessionUser,
        meta: RequestMeta,
        origin: WriteOrigin | None,
        acting: Acting | None,
        approval: str | None,
        reads: InstructionReads | None,
        idempotency_key: str | None,
        replay: idempotency.Replay | None,
        span: telemetry.Span,
    ) -> Any:
        # What counted_write does, inline: a top-level write is the hottest path there is.
        try:
            handler, model = self._admission.admit(qn, "write", payload, user)
            plan = self.plan_of(handler)
            if plan.rate_limited:
                self._admission.check_rate(handler, user, meta)
            key = idempotency.key_of(
                idempotency_key,
                handler.qn,
                user,
                lambda: payload_digest(model),
                answer_once=handler.answer_once,
            )
            opened: list[Request] = []
            # A kept answer notes the files it shows with links: a repeat mints them again.
            linked: list[tuple[str, str]] | None = None if key is None else []

            def run(conn: Connection) -> Any:
                request = open_request(conn, "write", handler, user, meta, origin, plan.entry)
                opened.append(request)
                note_entry(span, request)
                request.acting = acting
                request.reads = reads
                request.linked = linked
                if plan.approved_for_agents:
                    request.approval_id = self._approvals.require(
                        conn, handler, model, user, approval, request.request_id
                    )
                return self._run_write(request, plan, model, user)

            if key is None:
                with self._database.begin() as conn:
                    result = run(conn)
            else:
                result, replayed = self._keyed.run(key, replay, run, reads, linked)
                if replayed:
                    return result
            request = opened[-1]
        except AsanohaError as error:
            count_failed_write(qn, error)
            raise
        except Exception:
            count_write(qn, "failed", "internal")
            raise
        self._committed([qn], request)
        return result

    def batch(
        self,
        items: Sequence[tuple[str, Any]],
        user: SessionUser,
        *,
        meta: RequestMeta | None = None,
        idempotency_key: str | None = None,
        replay: idempotency.Replay | None = None,
    ) -> list[Any]:
        """Run several writes in one transaction; each item is its own entry handler.

        The first failure rolls back every item and is raised with ``details["index"]``.
        ``idempotency_key`` keeps the batch's first outcome as ``write`` does; the
        digest covers every item's handler and payload.
        """
        with observed("batch", idempotency.BATCH_SCOPE, user, meta) as span:
            span.set("batch.items", len(items))
            return self._dispatch_batch(items, user, meta, idempotency_key, replay)

    def _dispatch_batch(
        self,
        items: Sequence[tuple[str, Any]],
        user: SessionUser,
        meta: RequestMeta | None,
        idempotency_key: str | None,
        replay: idempotency.Replay | None,
    ) -> list[Any]:
        key: idempotency.IdempotencyKey | None = None
        if idempotency_key is not None:
            digest = idempotency.digest_of([[qn, payload] for qn, payload in items])
            once = self._admission.answering_once([qn for qn, _ in items])
            key = idempotency.key_of(
                idempotency.check_key(idempotency_key),
                idempotency.BATCH_SCOPE if once is None else once.qn,
                user,
                lambda: digest,
                answer_once=None if once is None else once.answer_once,
            )
        holder: list[Request] = []
        linked: list[tuple[str, str]] | None = None if key is None else []

        def run(conn: Connection) -> list[Any]:
            results: list[Any] = []
            holder.clear()
            self._run_batch_items(conn, items, user, meta, results, holder, linked)
            return results

        if key is None:
            with self._database.begin() as conn:
                results = run(conn)
        else:
            kept, replayed = self._keyed.run(key, replay, run, linked=linked)
            results = list(kept)
            if replayed:
                return results
        self._committed([qn for qn, _ in items], holder[0] if holder else None)
        return results

    def _run_batch_items(
        self,
        conn: Connection,
        items: Sequence[tuple[str, Any]],
        user: SessionUser,
        meta: RequestMeta | None,
        results: list[Any],
        holder: list[Request],
        linked: list[tuple[str, str]] | None = None,
    ) -> None:
        """The items of a batch in order; ``holder`` gets the root request when one opens
        (collecting the files shown with links in ``linked``, a keyed batch's). Each item
        is traced and logged as a single write of its handler."""
        for index, (qn, payload) in enumerate(items):
            try:
                with observed("write", qn, user, meta) as span:
                    results.append(
                        self._run_batch_item(conn, qn, payload, user, meta, holder, span, linked)
                    )
            except AsanohaError as error:
                error.details["index"] = index
                count_failed_write(qn, error)
                raise

    def _run_batch_item(
        self,
        conn: Connection,
        qn: str,
        payload: Any,
        user: SessionUser,
        meta: RequestMeta | None,
        holder: list[Request],
        span: telemetry.Span,
        linked: list[tuple[str, str]] | None = None,
    ) -> Any:
        handler, model = self._admission.admit(qn, "write", payload, user, conn)
        plan = self.plan_of(handler)
        if plan.rate_limited:
            self._admission.check_rate(handler, user, meta)
        if not holder:
            holder.append(open_request(conn, "write", handler, user, meta, None, plan.entry))
            request = holder[0]
            request.linked = linked
        else:
            entry = plan.entry
            request = holder[0].with_entry(
                entry, WriteOrigin.of_call(handler.qn, user, handler.access, entry.risk)
            )
        note_entry(span, request)
        if plan.approved_for_agents:
            # A batch carries no approval tokens: an agent's high-risk item is refused.
            self._approvals.require(conn, handler, model, user, None, request.request_id)
        return self._run_write(request, plan, model, user)

    def _committed(self, qns: Sequence[str], request: Request | None) -> None:
        """Count the committed writes of ``qns`` and run ``after_commit``. Never raises: the
        write has committed, and an error answer would have its caller repeat it."""
        try:
            for qn in qns:
                count_write(qn, "ok")
        except Exception:
            log.warning("counting a committed write failed", exc_info=True)
        if request is not None:
            self._after_commit(request)

    def _run_nested(
        self,
        parent: Request,
        handler: HandlerDef,
        model: pydantic.BaseModel,
        user: SessionUser,
        key: idempotency.IdempotencyKey | None = None,
        replay: idempotency.Replay | None = None,
    ) -> Any:
        # A job's or consumer's unit of work has no entry handler: what it dispatches is.
        plan = self.plan_of(handler)
        request = parent if parent.entry is not None else parent.with_entry(plan.entry)
        return self._keyed.run_nested(
            request, key, replay, lambda: self._run_write(request, plan, model, user)
        )

    def _run_write(
        self, request: Request, plan: WritePlan, model: pydantic.BaseModel, user: SessionUser
    ) -> Any:
        """The plan's steps inside the transaction: the handler, then its triggered jobs."""
        handler = plan.handler
        try:
            context = self._context(request, handler, user)
            result = run_guarded(handler.qn, lambda: handler.func(model, context))
        except DataError as exc:
            # The database refused a value the payload model let through (a NUL character,
            # a number beyond a column's range): bad input, answered as such, not a crash.
            detail = str(exc.orig).strip().splitlines()[0] if exc.orig else "value refused"
            raise UnprocessableError(
                Reasons.UNPROCESSABLE, handler=handler.qn, error=detail
            ) from None
        if plan.triggered or plan.workflows:
            self._enqueue_triggered(request, plan, model, user, result)
        return result

    def _enqueue_triggered(
        self,
        request: Request,
        plan: WritePlan,
        model: pydantic.BaseModel,
        user: SessionUser,
        result: Any,
    ) -> None:
        handler = plan.handler
        payload = model.model_dump(mode="json")
        # The job sees the handler's result as the caller did (JSON), as ``ctx.trigger.result``,
        # made storable here: nothing about it may fail the write (see ``trigger_result``).
        stored = storable_trigger_result(result, handler.qn)
        self._jobs.place_triggered(request, plan.triggered, payload, user, handler.qn, stored)
        for workflow in plan.workflows:
            self._jobs.start_workflow(request, workflow, payload, user, trigger_name=handler.qn)

    def plan_of(self, handler: HandlerDef) -> WritePlan:
        """The write plan of ``handler`` (see ``write_plan``), made once."""
        plan = self._plans.get(handler.qn)
        # A registry's handler is the one planned; another object of the same name (a test
        # that builds its own) gets a plan of its own.
        if plan is None or plan.handler is not handler:
            limiter = self._admission.rate_limiter
            default = limiter.default if limiter is not None else None
            plan = build_write_plan(self._registry, handler, default)
            self._plans[handler.qn] = plan
        return plan
