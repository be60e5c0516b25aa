"""``Service``: the single entry of every write and query (HTTP, jobs, consumers, agent tools).

A top-level write reads as named steps over one ``Request``: admit (resolve, access,
validate) -> open the request (entry handler, origin) -> run the handler (the executor records
events and projects rows) -> enqueue triggered jobs -> commit -> publish. Nested writes get the
parent request explicitly and run in a savepoint of its transaction.
"""

from __future__ import annotations

import datetime as dt
import logging
import secrets
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pydantic
from sqlalchemy import Connection
from sqlalchemy.exc import DataError

from asanoha.platform import telemetry
from asanoha.platform.errors import (
    AccessDeniedError,
    AsanohaError,
    NotFoundError,
    Reasons,
    UnprocessableError,
)
from asanoha.platform.metrics import (
    count_after_commit_failure,
    count_failed_write,
    count_replica_read,
    count_write,
)
from asanoha.platform.model import (
    EntityDef,
    HandlerDef,
    Registry,
    SessionUser,
    resolve_agent_exposure,
    to_kebab,
)
from asanoha.platform.personal.master_keys import KeyWrapper
from asanoha.platform.personal.vault import PersonalData
from asanoha.platform.personal.vault import attach as attach_personal_data
from asanoha.platform.service import (
    gates,
    idempotency,
    job_pauses,
    outbox,
)
from asanoha.platform.service.approvals import Approvals, ApprovalSigner, payload_digest
from asanoha.platform.service.domain_events import DomainEvents
from asanoha.platform.service.executor import EntityExecutor, EntityReader, ExecutorEnv
from asanoha.platform.service.handler_context import QueryContext, WriteContext
from asanoha.platform.service.instruction_reads import InstructionReads
from asanoha.platform.service.job_enqueue import JobEnqueuer, JobRequest
from asanoha.platform.service.keyed_writes import KeyedWrites
from asanoha.platform.service.observed import note_entry, observed
from asanoha.platform.service.outbox import OutboxPublisher
from asanoha.platform.service.ownership import OwnerRules
from asanoha.platform.service.rate_limits import RateLimiter
from asanoha.platform.service.request import (
    Acting,
    EntryHandler,
    Request,
    RequestKind,
    RequestMeta,
    WriteOrigin,
)
from asanoha.platform.service.trigger_result import (
    storable_trigger_result,
)
from asanoha.platform.service.validation import (
    check_storable,
    validate_payload,
)
from asanoha.platform.service.write_plan import WritePlan, build_write_plan
from asanoha.platform.store import (
    Database,
    StoredEvent,
    Tables,
    build_tables,
)
from asanoha.platform.store.replica import ReadAfter, ReadReplica

CommitListener = Callable[[Sequence[StoredEvent]], None]
log = logging.getLogger("asanoha.service")


class Service:
    """The service layer of one application."""

    def __init__(
        self,
        registry: Registry,
        database: Database,
        tables: Tables | None = None,
        *,
        publisher: OutboxPublisher | None = None,
        approval_key: bytes | None = None,
        operator_tenant: str | None = None,
        idempotency_ttl: float = 86400.0,
        idempotency_wait: float = 10.0,
        rate_limiter: RateLimiter | None = None,
        broker_hold: Callable[[str], float] | None = None,
        key_wrapper: KeyWrapper | None = None,
        replica: ReadReplica | None = None,
    ) -> None:
        self.registry = registry
        #: Lane -> the QNs of its jobs (a paused lane pauses them).
        self.job_lanes = job_pauses.lanes_of(registry)
        #: Counts the calls of handlers that declare ``rate_limit=`` (Redis).
        self.rate_limiter = rate_limiter
        #: job qn -> the longest countdown the broker may hold for it; a job delayed longer
        #: waits in its row for the relay (without: every delayed job waits in its row).
        self.broker_hold = broker_hold or (lambda job_qn: 0.0)
        #: The tenant that operates the whole application (``ASANOHA_OPERATOR_TENANT``).
        self.operator_tenant = operator_tenant
        self.database = database
        self.tables = tables or build_tables(registry)
        #: Runs writes under their callers' idempotency keys (``keyed_writes``).
        self.keyed = KeyedWrites(
            database, self.tables, ttl_seconds=idempotency_ttl, wait_seconds=idempotency_wait
        )
        self.publisher = publisher
        #: How personal values are stored: sealed under per-subject keys that ``key_wrapper``
        #: wraps; without one (development only) as they are.
        self.personal = PersonalData(key_wrapper, self.tables, database.backend)
        attach_personal_data(self.personal, database.engine)
        #: The read replica of queries declared ``replica=True`` (``None``: none configured).
        self.replica = replica
        if replica is not None:
            attach_personal_data(self.personal, replica.database.engine)
        # Without a configured key (a bare Service in one process) a random one: tokens then
        # hold only in this process.
        signer = ApprovalSigner(approval_key or secrets.token_bytes(32))
        self.approvals = Approvals(signer, registry, self.tables)
        #: Whose rows each caller reaches, from the entities' standard handlers (``ownership``).
        self.owner_rules = OwnerRules(registry)
        #: What the entity executor works with (never the Service itself).
        self.executor_env = ExecutorEnv(
            registry, self.tables, self.personal, self.owner_rules, database.backend
        )
        #: Places job rows in write transactions (``job_enqueue``).
        self.jobs_enqueue = JobEnqueuer(registry, self.tables, self.broker_hold)
        #: Appends handlers' declared domain events (``ctx.append_event``).
        self.domain_events = DomainEvents(
            registry, self.tables, database.backend, self.personal, self.owner_rules
        )
        self._commit_listeners: list[CommitListener] = []
        # Resolved once per process: the registry and its definitions do not change.
        self._entity_defs: dict[tuple[str, str], EntityDef] = {}
        self._entries: dict[str, EntryHandler] = {}
        #: Every write handler's plan, made once (see ``write_plan``); made here, at boot, so
        #: that a plan that cannot be made fails the application's start.
        self._plans: dict[str, WritePlan] = {}
        for declared in registry.handlers:
            if declared.kind == "write":
                self.plan_of(declared)

    # -- writes -----------------------------------------------------------------------------

    def dispatch_write(
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
            handler, model = self._admit(qn, "write", payload, user)
            key = idempotency.key_of(
                idempotency_key, handler.qn, user, lambda: payload_digest(model)
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
            handler, model = self._admit(qn, "write", payload, user)
            plan = self.plan_of(handler)
            if plan.rate_limited:
                self._check_rate(handler, user, meta)
            key = idempotency.key_of(
                idempotency_key, handler.qn, user, lambda: payload_digest(model)
            )
            opened: list[Request] = []

            def run(conn: Connection) -> Any:
                request = self._open(conn, "write", handler, user, meta, origin, plan.entry)
                opened.append(request)
                note_entry(span, request)
                request.acting = acting
                request.reads = reads
                if plan.approved_for_agents:
                    request.approval_id = self.approvals.require(
                        conn, handler, model, user, approval, request.request_id
                    )
                return self._run_write(request, plan, model, user)

            if key is None:
                with self.database.begin() as conn:
                    result = run(conn)
            else:
                result, replayed = self.keyed.run(key, replay, run, reads)
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

    def dispatch_batch(
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
        ``idempotency_key`` keeps the batch's first outcome as ``dispatch_write`` does; the
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
            key = idempotency.key_of(
                idempotency.check_key(idempotency_key),
                idempotency.BATCH_SCOPE,
                user,
                lambda: digest,
            )
        holder: list[Request] = []

        def run(conn: Connection) -> list[Any]:
            results: list[Any] = []
            holder.clear()
            self._run_batch_items(conn, items, user, meta, results, holder)
            return results

        if key is None:
            with self.database.begin() as conn:
                results = run(conn)
        else:
            kept, replayed = self.keyed.run(key, replay, run)
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
    ) -> None:
        """The items of a batch in order; ``holder`` gets the root request when one opens.
        Each item is traced and logged as a single write of its handler."""
        for index, (qn, payload) in enumerate(items):
            try:
                with observed("write", qn, user, meta) as span:
                    results.append(
                        self._run_batch_item(conn, qn, payload, user, meta, holder, span)
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
    ) -> Any:
        handler, model = self._admit(qn, "write", payload, user)
        plan = self.plan_of(handler)
        if plan.rate_limited:
            self._check_rate(handler, user, meta)
        if not holder:
            holder.append(self._open(conn, "write", handler, user, meta, None, plan.entry))
            request = holder[0]
        else:
            entry = plan.entry
            request = holder[0].with_entry(
                entry, WriteOrigin.of_call(handler.qn, user, handler.access, entry.risk)
            )
        note_entry(span, request)
        if plan.approved_for_agents:
            # A batch carries no approval tokens: an agent's high-risk item is refused.
            self.approvals.require(conn, handler, model, user, None, request.request_id)
        return self._run_write(request, plan, model, user)

    @contextmanager
    def unit_of_work(
        self,
        user: SessionUser,
        *,
        origin: WriteOrigin | None = None,
        meta: RequestMeta | None = None,
        conn: Connection | None = None,
        acting: Acting | None = None,
    ) -> Iterator[Request]:
        """A write request without an entry handler: the unit of work of a job or consumer
        (``acting``, which the gates read).

        On its own transaction it commits and publishes when the block exits; on ``conn`` (the
        caller's open transaction) the caller commits and then calls ``after_commit``.
        """
        origin = origin or WriteOrigin()
        if conn is not None:
            yield Request(conn, user, "write", None, origin, meta or RequestMeta(), acting=acting)
            return
        with self.database.begin() as own:
            request = Request(
                own, user, "write", None, origin, meta or RequestMeta(), acting=acting
            )
            yield request
        self.after_commit(request)

    def _committed(self, qns: Sequence[str], request: Request | None) -> None:
        """Count the committed writes of ``qns`` and run ``after_commit``. Never raises: the
        write has committed, and an error answer would have its caller repeat it."""
        try:
            for qn in qns:
                count_write(qn, "ok")
        except Exception:
            log.warning("counting a committed write failed", exc_info=True)
        if request is not None:
            self.after_commit(request)

    def after_commit(self, request: Request) -> None:
        """Publish the request's outbox rows and tell the commit listeners. Never raises: the
        write has committed, so its caller gets its result; what fails is left to the relay."""
        if request.outbox:
            try:
                outbox.publish_messages(self.database, self.tables, self.publisher, request.outbox)
            except Exception:
                log.warning(
                    "publishing after commit failed; the relay sends the jobs", exc_info=True
                )
        if request.appended:
            for listener in self._commit_listeners:
                try:
                    listener(request.appended)
                except Exception:
                    log.warning("commit listener %r failed", listener, exc_info=True)
            try:
                self._run_after_commit_hooks(request.appended)
            except Exception:
                # Each hook's failure is caught below; this is the bookkeeping around them.
                log.warning("running the after_commit hooks failed", exc_info=True)

    def _run_after_commit_hooks(self, events: Sequence[StoredEvent]) -> None:
        """Each entity's ``after_commit`` hooks with its committed events. A failure is logged
        and counted, never raised: the caller's write has committed."""
        for event in events:
            for hook in self.registry.hooks("after_commit", event.stream_type):
                try:
                    hook(event)
                except Exception:
                    count_after_commit_failure(event.stream_type)
                    log.exception(
                        "after_commit hook %r of %s failed on event %s",
                        hook,
                        event.stream_type,
                        event.id,
                    )

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
        return self.keyed.run_nested(
            request, key, replay, lambda: self._run_write(request, plan, model, user)
        )

    def _run_write(
        self, request: Request, plan: WritePlan, model: pydantic.BaseModel, user: SessionUser
    ) -> Any:
        """The plan's steps inside the transaction: the handler, then its triggered jobs."""
        handler = plan.handler
        try:
            result = handler.func(model, WriteContext(self, request, handler, user))
        except DataError as exc:
            # The database refused a value the payload model let through (a NUL character,
            # a number beyond a column's range): bad input, answered as such, not a crash.
            detail = str(exc.orig).strip().splitlines()[0] if exc.orig else "value refused"
            raise UnprocessableError(
                Reasons.UNPROCESSABLE, handler=handler.qn, error=detail
            ) from None
        if plan.triggered:
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
        self.jobs_enqueue.place_triggered(
            request, plan.triggered, payload, user, handler.qn, stored
        )

    # -- queries ----------------------------------------------------------------------------

    def dispatch_query(
        self,
        qn: str,
        payload: Any,
        user: SessionUser,
        *,
        parent: Request | None = None,
        meta: RequestMeta | None = None,
        reads: InstructionReads | None = None,
        read_after: ReadAfter | None = None,
    ) -> Any:
        """Run the query handler ``qn`` for ``user`` and return its data.

        Without ``parent`` it reads in its own read-only transaction and is the entry handler;
        with ``parent`` it reads through the parent's transaction (its own writes included).
        ``reads`` collects the instruction fields the query reads. ``read_after``: the caller
        may be served by the read replica, if the handler is declared ``replica=True`` and
        the replica has replayed the caller's last write (see ``store.replica``); without
        it, the primary serves.
        """
        if parent is not None:
            handler, model = self._admit(qn, "query", payload, user)
            return handler.func(model, QueryContext(self, parent, handler, user))
        with observed("query", qn, user, meta) as span:
            handler, model = self._admit(qn, "query", payload, user)
            self._check_rate(handler, user, meta)
            with self._reading(handler, read_after, span) as conn:
                request = self._open(conn, "query", handler, user, meta, None)
                note_entry(span, request)
                request.reads = reads
                return handler.func(model, QueryContext(self, request, handler, user))

    @contextmanager
    def _reading(
        self, handler: HandlerDef, read_after: ReadAfter | None, span: telemetry.Span
    ) -> Iterator[Connection]:
        """The read-only connection a top-level query reads through."""
        if self.replica is None or read_after is None or not handler.replica:
            with self.database.read_only() as conn:
                yield conn
            return
        with self.replica.read_only(read_after) as (conn, bypass):
            count_replica_read(bypass)
            span.set("db.replica", bypass is None)
            yield conn

    def commit_position(self) -> str | None:
        """Where the primary's log stands after the caller's writes, for the caller's next
        ``read_after``; ``None`` without a read replica."""
        return self.replica.commit_position() if self.replica is not None else None

    # -- entities, events and jobs ----------------------------------------------------------

    def entity_def(self, name: str, *, feature: str, caller: str) -> EntityDef:
        """Entity ``name`` of ``feature``, or ``other-feature:name``; ``caller`` names who asked."""
        # The conversion of registration: crud("promptNote") is found as "promptNote",
        # "prompt_note" or "prompt-note", in this feature or as "other:promptNote".
        found = self._entity_defs.get((name, feature))
        if found is not None:
            return found
        scope, _, local = name.rpartition(":")
        key = f"{scope or feature}:{to_kebab(local)}"
        entity_def = self.registry.find_entity(key)
        if entity_def is None:
            raise LookupError(f"{caller}: no entity {name!r} is registered (looked for {key!r})")
        self._entity_defs[name, feature] = entity_def
        return entity_def

    def reader(
        self, request: Request, name: str, user: SessionUser, *, feature: str, caller: str
    ) -> EntityReader:
        """Reads of entity ``name`` for ``user`` inside ``request``."""
        entity_def = self.entity_def(name, feature=feature, caller=caller)
        return EntityReader(self.executor_env, request.conn, entity_def, user, request, caller)

    def executor(
        self, request: Request, name: str, user: SessionUser, *, feature: str, caller: str
    ) -> EntityExecutor:
        """The entity executor of ``name`` for ``user`` inside the write ``request``."""
        gates.check_write_allowed(request, "entity", name)
        entity_def = self.entity_def(name, feature=feature, caller=caller)
        return EntityExecutor(self.executor_env, request.conn, entity_def, user, request, caller)

    def enqueue_job(
        self,
        job_qn: str,
        payload: dict[str, Any],
        user: SessionUser,
        *,
        parent: Request | None = None,
        trigger_name: str = "manual",
        origin: WriteOrigin | None = None,
        idempotency_key: str | None = None,
        trigger_event_id: int | None = None,
        delay: float | None = None,
        at: dt.datetime | None = None,
        manual: bool = True,
        publish: bool = True,
        priority: int | None = None,
    ) -> uuid.UUID:
        """Enqueue ``job_qn`` through the outbox: inside ``parent``'s transaction (published
        when it commits), else on its own. ``origin`` is the chain the caller acts for.

        With ``idempotency_key``, a second enqueue with the same key enqueues nothing and
        returns the first job's id. ``trigger_event_id`` is the stored event that triggered
        the job (its ``ctx.trigger_event``). ``delay`` (seconds) or ``at`` (an aware
        datetime) hold its first attempt back: the broker holds a short wait, the row a
        longer one (the relay publishes it when it is due).

        ``manual`` (every caller but the platform's own triggers: cron ticks, events): the
        payload is validated against the job's ``schema=`` (400 ``validation_error`` with
        the field errors) and stored as validated. ``publish=False`` leaves the row to the
        relay (a process whose broker reaches no worker). ``priority`` (0..9) overrides the
        job's declared ``priority=`` for this run.
        """
        if parent is not None:
            gates.check_write_allowed(parent, "dispatch", job_qn)
        asked = self.jobs_enqueue.check(
            job_qn, payload, delay=delay, at=at, manual=manual, priority=priority
        )
        if parent is None:
            with self.unit_of_work(user, origin=origin) as request:
                return self._place_job(
                    request, asked, user, trigger_name, idempotency_key, trigger_event_id,
                    publish, priority,
                )  # fmt: skip
        return self._place_job(
            parent, asked, user, trigger_name, idempotency_key, trigger_event_id, publish,
            priority,
        )  # fmt: skip

    def _place_job(
        self,
        request: Request,
        asked: JobRequest,
        user: SessionUser,
        trigger_name: str,
        idempotency_key: str | None,
        trigger_event_id: int | None,
        publish: bool,
        priority: int | None,
    ) -> uuid.UUID:
        return self.jobs_enqueue.place(
            request,
            asked,
            user,
            trigger_name=trigger_name,
            idempotency_key=idempotency_key,
            trigger_event_id=trigger_event_id,
            publish=publish,
            priority=priority,
        )

    def relay_outbox(self, limit: int = 100) -> int:
        """Publish due job rows nobody published; return how many were sent."""
        if self.publisher is None:
            return 0
        with self.database.connect() as conn:
            paused = job_pauses.paused_job_qns(conn, self.tables, self.job_lanes)
        return outbox.relay_outbox(
            self.database, self.tables, self.publisher, limit=limit, paused=paused
        )

    def count_unpublished_outbox(self) -> int:
        """How many outbox rows wait to be published."""
        with self.database.connect() as conn:
            return outbox.count_unpublished(conn, self.tables)

    def add_commit_listener(self, listener: CommitListener) -> None:
        """Call ``listener(events)`` after every commit that appended events."""
        self._commit_listeners.append(listener)

    # -- pieces -----------------------------------------------------------------------------

    def _admit(
        self, qn: str, kind: str, payload: Any, user: SessionUser
    ) -> tuple[HandlerDef, pydantic.BaseModel]:
        """Steps 1-3 of every dispatch: the handler exists, admits ``user``, accepts ``payload``."""
        handler = self.registry.find_handler(qn)
        if handler is None or handler.kind != kind:
            raise NotFoundError(Reasons.HANDLER_NOT_FOUND, handler=qn)
        if not handler.access.admits(user):
            raise AccessDeniedError(
                Reasons.ROLE_REQUIRED, handler=handler.qn, roles=handler.access.describe()
            )
        check_storable(payload, handler.qn)
        return handler, validate_payload(handler.payload_model, payload, handler.qn)

    def _check_rate(self, handler: HandlerDef, user: SessionUser, meta: RequestMeta | None) -> None:
        """Count a top-level call of a rate-limited handler (see ``rate_limits``)."""
        if self.rate_limiter is None:
            if handler.rate_limit is None:
                return
            # App refuses to start this way; a bare Service must be given a limiter.
            raise RuntimeError(
                f"{handler.qn} declares rate_limit= but the service has no rate limiter; "
                "set ASANOHA_RATE_LIMIT_URL (or a redis:// ASANOHA_BROKER_URL)"
            )
        # The limiter knows the application's default for handlers that declare none.
        self.rate_limiter.check(handler, user, meta)

    def plan_of(self, handler: HandlerDef) -> WritePlan:
        """The write plan of ``handler`` (see ``write_plan``), made once."""
        plan = self._plans.get(handler.qn)
        # A registry's handler is the one planned; another object of the same name (a test
        # that builds its own) gets a plan of its own.
        if plan is None or plan.handler is not handler:
            default = self.rate_limiter.default if self.rate_limiter is not None else None
            plan = build_write_plan(self.registry, handler, default)
            self._plans[handler.qn] = plan
        return plan

    def _entry_of(self, handler: HandlerDef) -> EntryHandler:
        entry = self._entries.get(handler.qn)
        if entry is None or self.registry.find_handler(handler.qn) is not handler:
            entry = EntryHandler(handler.qn, resolve_agent_exposure(handler).risk)
            self._entries[handler.qn] = entry
        return entry

    def _open(
        self,
        conn: Connection,
        kind: RequestKind,
        handler: HandlerDef,
        user: SessionUser,
        meta: RequestMeta | None,
        origin: WriteOrigin | None,
        entry: EntryHandler | None = None,
    ) -> Request:
        """The request of a top-level dispatch: ``handler`` is its entry handler (``entry``:
        as its write plan has it)."""
        meta = meta or RequestMeta()
        entry = entry or self._entry_of(handler)
        request = Request(
            conn=conn,
            user=user,
            kind=kind,
            entry=entry,
            origin=origin or WriteOrigin.of_call(handler.qn, user, handler.access, entry.risk),
            meta=meta,
        )
        if meta.request_id:
            request.request_id = meta.request_id
        return request
