"""``Service``: the single entry of every write and query (HTTP, jobs, consumers, agent tools).

A top-level write reads as named steps over one ``Request``: admit (resolve, access,
validate) -> open the request (entry handler, origin) -> run the handler (the executor records
events and projects rows) -> enqueue triggered jobs -> commit -> publish. Nested writes get the
parent request explicitly and run in a savepoint of its transaction.
"""

from __future__ import annotations

import dataclasses
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
    ConflictError,
    NotFoundError,
    Reasons,
    UnprocessableError,
    ValidationError,
)
from asanoha.platform.metrics import (
    count_after_commit_failure,
    count_failed_write,
    count_replica_read,
    count_write,
)
from asanoha.platform.model import (
    EntityDef,
    EventDef,
    HandlerDef,
    Registry,
    SessionUser,
    resolve_agent_exposure,
    to_kebab,
)
from asanoha.platform.personal import redaction
from asanoha.platform.personal.events import seal_event_payload
from asanoha.platform.personal.master_keys import KeyWrapper
from asanoha.platform.personal.vault import PersonalData
from asanoha.platform.personal.vault import attach as attach_personal_data
from asanoha.platform.service import (
    gates,
    idempotency,
    job_concurrency,
    job_pauses,
    outbox,
    ownership,
)
from asanoha.platform.service.approvals import Approvals, ApprovalSigner, payload_digest
from asanoha.platform.service.executor import EntityExecutor, EntityReader
from asanoha.platform.service.handler_context import QueryContext, WriteContext
from asanoha.platform.service.instruction_reads import InstructionReads
from asanoha.platform.service.observed import note_entry, observed
from asanoha.platform.service.outbox import OutboxMessage, OutboxPublisher
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
    StoredTriggerResult,
    storable_trigger_result,
)
from asanoha.platform.service.validation import (
    check_storable,
    field_errors,
    invalid_field,
    validate_payload,
)
from asanoha.platform.store import (
    Database,
    StoredEvent,
    Tables,
    append_event,
    apply_entity_event,
    build_tables,
    stream_version,
)
from asanoha.platform.store.projections import entity_of_event, lock_entity_row, stream_entity
from asanoha.platform.store.replica import ReadAfter, ReadReplica

CommitListener = Callable[[Sequence[StoredEvent]], None]
log = logging.getLogger("asanoha.service")


class _Undo(Exception):
    """Roll the write back: its key got an outcome meanwhile, or it was refused (kept)."""


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
        #: Seconds an idempotent write's outcome is kept (``ASANOHA_IDEMPOTENCY_TTL``).
        self.idempotency_ttl = idempotency_ttl
        #: Seconds a repeat waits for a running write with its key (``ASANOHA_IDEMPOTENCY_WAIT``).
        self.idempotency_wait = idempotency_wait
        #: Counts the calls of handlers that declare ``rate_limit=`` (Redis).
        self.rate_limiter = rate_limiter
        #: job qn -> the longest countdown the broker may hold for it; a job delayed longer
        #: waits in its row for the relay (without: every delayed job waits in its row).
        self.broker_hold = broker_hold or (lambda job_qn: 0.0)
        #: The tenant that operates the whole application (``ASANOHA_OPERATOR_TENANT``).
        self.operator_tenant = operator_tenant
        self.database = database
        self.tables = tables or build_tables(registry)
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
        self._commit_listeners: list[CommitListener] = []
        # Resolved once per process: the registry and its definitions do not change.
        self._entity_defs: dict[tuple[str, str], EntityDef] = {}
        self._entries: dict[str, EntryHandler] = {}

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
            handler, model = self._admit(qn, "write", payload, user)
            key = self._key_of(idempotency_key, handler.qn, user, lambda: payload_digest(model))
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
            self._check_rate(handler, user, meta)
            key = self._key_of(idempotency_key, handler.qn, user, lambda: payload_digest(model))
            opened: list[Request] = []

            def run(conn: Connection) -> Any:
                request = self._open(conn, "write", handler, user, meta, origin)
                opened.append(request)
                note_entry(span, request)
                request.acting = acting
                request.reads = reads
                request.approval_id = self.approvals.require(
                    conn, handler, model, user, approval, request.request_id
                )
                return self._run_write(request, handler, model, user)

            if key is None:
                with self.database.begin() as conn:
                    result = run(conn)
            else:
                result, replayed = self._run_keyed(key, replay, run)
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
            key = self._key_of(
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
            kept, replayed = self._run_keyed(key, replay, run)
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
        self._check_rate(handler, user, meta)
        if not holder:
            holder.append(self._open(conn, "write", handler, user, meta, None))
            request = holder[0]
        else:
            entry = self._entry_of(handler)
            request = holder[0].with_entry(
                entry, WriteOrigin.of_call(handler.qn, user, handler.access, entry.risk)
            )
        note_entry(span, request)
        # A batch carries no approval tokens: an agent's high-risk item is refused.
        self.approvals.require(conn, handler, model, user, None, request.request_id)
        return self._run_write(request, handler, model, user)

    # -- idempotency ------------------------------------------------------------------------

    def _key_of(
        self, key: str | None, handler_qn: str, user: SessionUser, digest: Callable[[], str]
    ) -> idempotency.IdempotencyKey | None:
        # The digest is made only for a keyed write: a write without a key pays nothing.
        if key is None:
            return None
        return idempotency.IdempotencyKey(user.tenant_id, user.id, handler_qn, key, digest())

    def _hold(
        self,
        conn: Connection,
        key: idempotency.IdempotencyKey | None,
        replay: idempotency.Replay | None,
    ) -> idempotency.Outcome | None:
        """The stored outcome of ``key`` (noted in ``replay``), or ``None``: run the write.
        Either way the transaction holds the key until it ends."""
        if key is None:
            return None
        stored = idempotency.hold(conn, self.tables, key, self.idempotency_wait)
        if stored is not None and replay is not None:
            replay.replayed = True
        return stored

    def _run_keyed(
        self,
        key: idempotency.IdempotencyKey,
        replay: idempotency.Replay | None,
        run: Callable[[Connection], Any],
    ) -> tuple[Any, bool]:
        """Run ``run(conn)`` in a transaction that holds ``key`` and keeps its outcome there;
        return the result and whether it is a stored one (the write did not run).

        A refusal (4xx) rolls the write back and is kept in a transaction of its own, then
        raised. A write whose key got an outcome meanwhile (committed between this
        transaction's snapshot and its lock) is rolled back and answers that outcome.
        """
        # The refusal is kept: the personal values the write revealed are kept out of it.
        with redaction.revealing():
            return self._run_keyed_revealing(key, replay, run)

    def _run_keyed_revealing(
        self,
        key: idempotency.IdempotencyKey,
        replay: idempotency.Replay | None,
        run: Callable[[Connection], Any],
    ) -> tuple[Any, bool]:
        refused: AsanohaError | None = None
        try:
            with self.database.begin() as conn:
                stored = self._hold(conn, key, replay)
                if stored is not None:
                    return stored.answer(), True
                try:
                    result = run(conn)
                except AsanohaError as error:
                    if not idempotency.is_storable(error):
                        raise
                    refused = error
                    raise _Undo from None
                outcome = idempotency.Outcome.of_result(result)
                if not idempotency.keep(conn, self.tables, key, outcome, self.idempotency_ttl):
                    raise _Undo
                return result, False
        except _Undo:
            pass
        with self.database.begin() as conn:
            stored = self._hold(conn, key, replay)
            if stored is None and refused is not None:
                outcome = idempotency.Outcome.of_error(refused)
                idempotency.keep(conn, self.tables, key, outcome, self.idempotency_ttl)
        if stored is not None:
            return stored.answer(), True
        if refused is not None:
            raise refused
        raise ConflictError(Reasons.IDEMPOTENCY_IN_PROGRESS, key=key.key, handler=key.handler_qn)

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
        gates.check_write_allowed(parent, handler)
        # A job's or consumer's unit of work has no entry handler: what it dispatches is.
        request = parent if parent.entry is not None else parent.with_entry(self._entry_of(handler))
        stored = self._hold(request.conn, key, replay)
        if stored is not None:
            return stored.answer()
        if key is not None and redaction.current() is None:
            # Its refusal is kept: what the nested write reveals is kept out of it.
            with redaction.revealing():
                return self._run_savepoint(request, handler, model, user, key, replay)
        return self._run_savepoint(request, handler, model, user, key, replay)

    def _run_savepoint(
        self,
        request: Request,
        handler: HandlerDef,
        model: pydantic.BaseModel,
        user: SessionUser,
        key: idempotency.IdempotencyKey | None,
        replay: idempotency.Replay | None,
    ) -> Any:
        mark = request.mark()
        savepoint = request.conn.begin_nested()
        try:
            result = self._run_write(request, handler, model, user)
            if key is not None:
                outcome = idempotency.Outcome.of_result(result)
                if not idempotency.keep(
                    request.conn, self.tables, key, outcome, self.idempotency_ttl
                ):
                    raise _Undo
        except _Undo:
            savepoint.rollback()
            request.undo_to(mark)
            assert key is not None
            answer = self._hold(request.conn, key, replay)
            if answer is None:
                raise ConflictError(
                    Reasons.IDEMPOTENCY_IN_PROGRESS, key=key.key, handler=key.handler_qn
                ) from None
            return answer.answer()
        except BaseException as error:
            savepoint.rollback()
            request.undo_to(mark)
            if (
                key is not None
                and isinstance(error, AsanohaError)
                and idempotency.is_storable(error)
            ):
                outcome = idempotency.Outcome.of_error(error)
                idempotency.keep(request.conn, self.tables, key, outcome, self.idempotency_ttl)
            raise
        savepoint.commit()
        return result

    def _run_write(
        self, request: Request, handler: HandlerDef, model: pydantic.BaseModel, user: SessionUser
    ) -> Any:
        try:
            result = handler.func(model, WriteContext(self, request, handler, user))
        except DataError as exc:
            # The database refused a value the payload model let through (a NUL character,
            # a number beyond a column's range): bad input, answered as such, not a crash.
            detail = str(exc.orig).strip().splitlines()[0] if exc.orig else "value refused"
            raise UnprocessableError(
                Reasons.UNPROCESSABLE, handler=handler.qn, error=detail
            ) from None
        self._enqueue_triggered(request, handler, model, user, result)
        return result

    def _enqueue_triggered(
        self,
        request: Request,
        handler: HandlerDef,
        model: pydantic.BaseModel,
        user: SessionUser,
        result: Any,
    ) -> None:
        triggered = self.registry.jobs_triggered_by(handler.qn)
        if not triggered:
            return
        payload = model.model_dump(mode="json")
        # The job sees the handler's result as the caller did (JSON), as ``ctx.trigger.result``,
        # made storable here: nothing about it may fail the write (see ``trigger_result``).
        stored = storable_trigger_result(result, handler.qn)
        for job in triggered:
            message = self._message(job.qn, payload, user, request, handler.qn, result=stored)
            placed = job_concurrency.place(request.conn, self.tables, job, message)
            if placed.message is not None:
                request.outbox.append(placed.message)

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
        return EntityReader(self, request.conn, entity_def, user, request, caller)

    def executor(
        self, request: Request, name: str, user: SessionUser, *, feature: str, caller: str
    ) -> EntityExecutor:
        """The entity executor of ``name`` for ``user`` inside the write ``request``."""
        if request.kind != "write":
            raise AccessDeniedError(Reasons.WRITE_IN_QUERY_DENIED, handler=caller, query=caller)
        entity_def = self.entity_def(name, feature=feature, caller=caller)
        return EntityExecutor(self, request.conn, entity_def, user, request, caller)

    def append_domain_event(
        self,
        request: Request,
        user: SessionUser,
        handler: HandlerDef,
        event: EventDef | str,
        payload: Any,
        *,
        stream_id: str,
        stream_type: str | None,
        expected_version: int | None,
    ) -> StoredEvent:
        """Append a declared domain event (see ``WriteContext.append_event``).

        A handler appends only its own feature's domain events; entity events come from the
        entity executor alone (403 ``event_append_denied``). On an entity's stream the event
        also moves the row's version, under the row's lock like every entity write.
        """
        qn = event.qn if isinstance(event, EventDef) else event
        declared = self.registry.event(qn)
        if declared is None:
            raise LookupError(f"{handler.qn}: event {qn!r} is not declared; use feature.event(...)")
        if declared.feature != handler.feature or entity_of_event(self.registry, qn) is not None:
            raise AccessDeniedError(
                Reasons.EVENT_APPEND_DENIED, handler=handler.qn, event=qn, feature=handler.feature
            )
        if declared.model is not None:
            body = validate_payload(declared.model, payload, handler.qn).model_dump(mode="json")
        elif isinstance(payload, dict):
            body = payload
        else:
            raise invalid_field(handler.qn, "$", "dict_type", "an event payload is a JSON object")
        conn = request.conn
        if declared.pii != "none":
            body = seal_event_payload(
                self.personal.vault(conn), declared, user.tenant_id, stream_id, body
            )
        entity_def = stream_entity(conn, self.tables, self.registry, user.tenant_id, stream_id)
        self._check_stream_type(handler, entity_def, stream_id, stream_type)
        expected = expected_version
        if entity_def is not None:
            # The stream is the entity's: the event takes its stream type (a rebuild replays
            # it), and the row lock comes first, as in the executor, so that concurrent
            # writers of the stream queue instead of deadlocking.
            stream_type = entity_def.key
            locked = lock_entity_row(conn, self.tables, entity_def, user.tenant_id, stream_id)
            ownership.check_stream_owned(
                conn, self.tables, self.owner_rules, entity_def, user, stream_id
            )
            if expected is None and locked is not None:
                expected = locked
        if expected is None:
            expected = stream_version(conn, self.tables, user.tenant_id, stream_id)
        stored = append_event(
            conn,
            self.database.backend,
            self.tables,
            tenant_id=user.tenant_id,
            stream_id=stream_id,
            stream_type=stream_type or declared.feature,
            expected_version=expected,
            type=qn,
            payload=body,
            metadata=self.event_metadata(request, user, handler.qn),
            created_by=user.id,
            schema_version=declared.schema_version,
        )
        if entity_def is not None:
            apply_entity_event(conn, self.tables, entity_def, stored)
        request.appended.append(stored)
        return stored

    def _check_stream_type(
        self,
        handler: HandlerDef,
        entity_def: EntityDef | None,
        stream_id: str,
        stream_type: str | None,
    ) -> None:
        """An entity's stream type is reserved for the streams its executor opened."""
        if stream_type is None:
            return
        if entity_def is not None and stream_type != entity_def.key:
            raise invalid_field(
                handler.qn,
                "stream_type",
                "entity_stream",
                f"stream {stream_id} belongs to entity {entity_def.key}; leave stream_type out",
            )
        if entity_def is None and self.registry.find_entity(stream_type) is not None:
            raise invalid_field(
                handler.qn,
                "stream_type",
                "entity_stream_type",
                f"{stream_type!r} is the stream type of an entity, whose streams only its "
                "executor opens; name a stream type of your own",
            )

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
        job = self.registry.job(job_qn)
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
        if parent is None:
            with self.unit_of_work(user, origin=origin) as request:
                return self.enqueue_job(
                    job_qn,
                    body,
                    user,
                    parent=request,
                    trigger_name=trigger_name,
                    idempotency_key=idempotency_key,
                    trigger_event_id=trigger_event_id,
                    delay=countdown,
                    manual=manual,
                    publish=publish,
                    priority=priority,
                )
        if idempotency_key is not None:
            found = outbox.find_enqueued(parent.conn, self.tables, idempotency_key)
            if found is not None:
                return found
        message = self._message(
            job_qn, body, user, parent, trigger_name, idempotency_key=idempotency_key
        )
        if trigger_event_id is not None:
            message = dataclasses.replace(
                message, headers={**message.headers, "trigger_event_id": trigger_event_id}
            )
        if priority is not None:
            message = dataclasses.replace(message, priority=priority)
        if countdown > 0 or not publish:
            by_broker = publish and countdown <= self.broker_hold(job_qn)
            message = dataclasses.replace(message, countdown=countdown, by_broker=by_broker)
        placed = job_concurrency.place(parent.conn, self.tables, job, message)
        if placed.message is not None:
            parent.outbox.append(placed.message)
        return placed.job_id

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

    def event_metadata(
        self, request: Request | None, user: SessionUser, handler_qn: str
    ) -> dict[str, Any]:
        """What an event records about who wrote it, through which handler, for which request."""
        meta = request.meta if request else RequestMeta()
        return {
            "user_id": user.id,
            "tenant_id": user.tenant_id,
            "handler": handler_qn,
            "entry_handler": request.entry.qn if request and request.entry else None,
            "origin": request.origin.to_header() if request else None,
            "request_id": meta.request_id or (request.request_id if request else None),
            "correlation_id": meta.correlation_id,
            "causation_id": meta.causation_id,
            # The trace of the write, which the consumers delivering the event join.
            **telemetry.trace_headers(),
        }

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
    ) -> Request:
        """The request of a top-level dispatch: ``handler`` is its entry handler."""
        meta = meta or RequestMeta()
        entry = self._entry_of(handler)
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

    def _message(
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
        headers = {
            "tenant_id": user.tenant_id,
            "triggered_by": user.id,
            "trigger_name": trigger_name,
            "origin": request.origin.to_header(),
            "request_id": request.request_id,
            "correlation_id": request.meta.correlation_id,
            # The job's attempts join the trace of the write that enqueued it.
            **telemetry.trace_headers(),
        }
        if result is not None and result.refused:
            headers["trigger_result_refused"] = result.refused
        job = self.registry.job(job_qn)
        return OutboxMessage(
            id=uuid.uuid4(),
            job_qn=job_qn,
            priority=None if job is None else job.priority,
            trigger_result=None if result is None else result.value,
            idempotency_key=idempotency_key,
            payload=payload,
            headers=headers,
        )
