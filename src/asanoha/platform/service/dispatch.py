"""``Service``: the single entry of every write and query (HTTP, jobs, consumers, agent tools).

A write goes: resolve the handler, check access, validate the payload, enter the request
context (the outermost dispatch sets the entry handler), run the handler in one transaction
(nested writes in savepoints), write the outbox rows of triggered jobs, commit, publish.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any

import pydantic
from sqlalchemy.exc import DataError

from asanoha.platform.errors import (
    AccessDeniedError,
    AsanohaError,
    NotFoundError,
    Reasons,
    UnprocessableError,
    ValidationError,
)
from asanoha.platform.model import (
    EventDef,
    HandlerDef,
    Registry,
    SessionUser,
    resolve_agent_exposure,
)
from asanoha.platform.service import outbox
from asanoha.platform.service.context import (
    EntryHandler,
    RequestContext,
    RequestMeta,
    current_request,
    enter_request,
    leave_request,
)
from asanoha.platform.service.handler_context import QueryContext, WriteContext
from asanoha.platform.service.outbox import OutboxMessage, OutboxPublisher
from asanoha.platform.service.validation import field_errors, invalid_field, validate_payload
from asanoha.platform.store import (
    Database,
    StoredEvent,
    Tables,
    append_event,
    build_tables,
    stream_version,
)

CommitListener = Callable[[Sequence[StoredEvent]], None]


class Service:
    """The service layer of one application."""

    def __init__(
        self, registry: Registry, database: Database, tables: Tables | None = None
    ) -> None:
        self.registry = registry
        self.database = database
        self.tables = tables or build_tables(registry)
        self.publisher: OutboxPublisher | None = None
        #: Seconds an unpublished outbox row is left to its writer before the relay takes it.
        self.relay_grace: float = 5.0
        self._commit_listeners: list[CommitListener] = []

    # -- writes -----------------------------------------------------------------------------

    def dispatch_write(
        self, qn: str, payload: Any, user: SessionUser, *, meta: RequestMeta | None = None
    ) -> Any:
        """Run the write handler ``qn`` for ``user`` and return its data."""
        handler, model = self._admit(qn, "write", payload, user)
        request = current_request()
        if request is not None:
            return self._run_nested(handler, model, user, request)
        with self.database.begin() as conn:
            request = self._new_request(conn, handler, user, meta)
            token = enter_request(request)
            try:
                result = self._run(handler, model, user, request)
            finally:
                leave_request(token)
        self._after_commit(request)
        return result

    def dispatch_batch(
        self,
        items: Sequence[tuple[str, Any]],
        user: SessionUser,
        *,
        meta: RequestMeta | None = None,
    ) -> list[Any]:
        """Run several writes in one transaction; each item is its own entry handler.

        The first failure rolls back every item and is raised with ``details["index"]``.
        """
        if current_request() is not None:
            raise RuntimeError("dispatch_batch cannot run inside another write")
        results: list[Any] = []
        with self.database.begin() as conn:
            request: RequestContext | None = None
            for index, (qn, payload) in enumerate(items):
                try:
                    handler, model = self._admit(qn, "write", payload, user)
                    if request is None:
                        request = self._new_request(conn, handler, user, meta)
                    else:
                        request.root_access = handler.access
                        request.entry = self._entry_of(handler)
                    token = enter_request(request)
                    try:
                        results.append(self._run(handler, model, user, request))
                    finally:
                        leave_request(token)
                except AsanohaError as error:
                    error.details["index"] = index
                    raise
        if request is not None:
            self._after_commit(request)
        return results

    def _run_nested(
        self,
        handler: HandlerDef,
        model: pydantic.BaseModel,
        user: SessionUser,
        request: RequestContext,
    ) -> Any:
        mark = request.mark()
        savepoint = request.conn.begin_nested()
        try:
            result = self._run(handler, model, user, request)
        except BaseException:
            savepoint.rollback()
            request.undo_to(mark)
            raise
        savepoint.commit()
        return result

    def _run(
        self,
        handler: HandlerDef,
        model: pydantic.BaseModel,
        user: SessionUser,
        request: RequestContext,
    ) -> Any:
        try:
            result = handler.func(model, WriteContext(self, request.conn, handler, user, request))
        except DataError as exc:
            # The database refused a value the payload model let through (a NUL character,
            # a number beyond a column's range): bad input, answered as such, not a crash.
            detail = str(exc.orig).strip().splitlines()[0] if exc.orig else "value refused"
            raise UnprocessableError(
                Reasons.UNPROCESSABLE, handler=handler.qn, error=detail
            ) from None
        triggered = self.registry.jobs_triggered_by(handler.qn)
        if triggered:
            payload = model.model_dump(mode="json")
            messages = [
                self._message(job.qn, payload, user, request, handler.qn) for job in triggered
            ]
            outbox.write_outbox(request.conn, self.tables, messages)
            request.outbox.extend(messages)
        return result

    def _after_commit(self, request: RequestContext) -> None:
        if request.outbox:
            outbox.publish_messages(self.database, self.tables, self.publisher, request.outbox)
        if request.appended:
            for listener in self._commit_listeners:
                listener(request.appended)

    # -- queries ----------------------------------------------------------------------------

    def dispatch_query(
        self, qn: str, payload: Any, user: SessionUser, *, meta: RequestMeta | None = None
    ) -> Any:
        """Run the query handler ``qn`` for ``user`` and return its data."""
        handler, model = self._admit(qn, "query", payload, user)
        request = current_request()
        if request is not None:
            # Inside a write: read through its transaction, so its own changes are visible.
            return handler.func(model, QueryContext(self, request.conn, handler, user, request))
        with self.database.connect() as conn:
            return handler.func(model, QueryContext(self, conn, handler, user))

    # -- events and jobs --------------------------------------------------------------------

    def append_domain_event(
        self,
        request: RequestContext,
        user: SessionUser,
        handler: HandlerDef,
        event: EventDef | str,
        payload: Any,
        *,
        stream_id: str,
        stream_type: str | None,
        expected_version: int | None,
    ) -> StoredEvent:
        """Append a declared domain event (see ``WriteContext.append_event``)."""
        qn = event.qn if isinstance(event, EventDef) else event
        declared = self.registry.event(qn)
        if declared is None:
            raise LookupError(f"{handler.qn}: event {qn!r} is not declared; use feature.event(...)")
        if declared.model is not None:
            body = validate_payload(declared.model, payload, handler.qn).model_dump(mode="json")
        elif isinstance(payload, dict):
            body = payload
        else:
            raise invalid_field(handler.qn, "$", "dict_type", "an event payload is a JSON object")
        expected = expected_version
        if expected is None:
            expected = stream_version(request.conn, self.tables, user.tenant_id, stream_id)
        stored = append_event(
            request.conn,
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
        request.appended.append(stored)
        return stored

    def enqueue_job(
        self,
        job_qn: str,
        payload: dict[str, Any],
        user: SessionUser,
        *,
        trigger_name: str = "manual",
    ) -> uuid.UUID:
        """Enqueue ``job_qn`` through the outbox: inside the running write, else on its own."""
        if self.registry.job(job_qn) is None:
            raise NotFoundError(Reasons.JOB_NOT_FOUND, job=job_qn)
        try:
            body = pydantic.TypeAdapter(dict[str, pydantic.JsonValue]).validate_python(payload)
        except pydantic.ValidationError as error:
            raise ValidationError(handler=job_qn, fields=field_errors(error)) from None
        request = current_request()
        if request is not None:
            message = self._message(job_qn, body, user, request, trigger_name)
            outbox.write_outbox(request.conn, self.tables, [message])
            request.outbox.append(message)
            return message.id
        message = self._message(job_qn, body, user, None, trigger_name)
        with self.database.begin() as conn:
            outbox.write_outbox(conn, self.tables, [message])
        outbox.publish_messages(self.database, self.tables, self.publisher, [message])
        return message.id

    def relay_outbox(self, limit: int = 100, *, grace: float | None = None) -> int:
        """Publish outbox rows their writer did not publish; return how many were sent."""
        if self.publisher is None:
            return 0
        return outbox.relay_outbox(
            self.database,
            self.tables,
            self.publisher,
            limit=limit,
            grace=self.relay_grace if grace is None else grace,
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
        self, request: RequestContext | None, user: SessionUser, handler_qn: str
    ) -> dict[str, Any]:
        """What an event records about who wrote it, through which handler, for which request."""
        meta = request.meta if request else RequestMeta()
        return {
            "user_id": user.id,
            "tenant_id": user.tenant_id,
            "handler": handler_qn,
            "entry_handler": request.entry.qn if request and request.entry else None,
            "request_id": meta.request_id or (request.request_id if request else None),
            "correlation_id": meta.correlation_id,
            "causation_id": meta.causation_id,
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
        return handler, validate_payload(handler.payload_model, payload, handler.qn)

    def _entry_of(self, handler: HandlerDef) -> EntryHandler:
        return EntryHandler(handler.qn, resolve_agent_exposure(handler).risk)

    def _new_request(
        self, conn: Any, handler: HandlerDef, user: SessionUser, meta: RequestMeta | None
    ) -> RequestContext:
        meta = meta or RequestMeta()
        request = RequestContext(
            conn=conn,
            root_user=user,
            root_access=handler.access,
            entry=self._entry_of(handler),
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
        request: RequestContext | None,
        trigger_name: str,
    ) -> OutboxMessage:
        meta = request.meta if request else RequestMeta()
        return OutboxMessage(
            id=uuid.uuid4(),
            job_qn=job_qn,
            payload=payload,
            headers={
                "tenant_id": user.tenant_id,
                "triggered_by": user.id,
                "trigger_name": trigger_name,
                "request_id": request.request_id if request else meta.request_id,
                "correlation_id": meta.correlation_id,
            },
        )
