"""The query pipeline: how every query runs its handler, top-level or nested.

A top-level query (an HTTP query, an MCP tool call, ``app.query``) is admitted (handler,
access, payload), counted by the rate limiter, and reads in a read-only transaction of its
own, where it is the entry handler; a query declared ``replica=True`` whose caller sends
``read_after`` reads from the read replica once it has replayed the caller's last write
(``store.replica``), else from the primary. A nested query (a handler's ``ctx.query``) is
admitted and reads through its parent's transaction, its own writes included. Either way the
handler runs guarded (``secret_guard``), and a query never writes: its context's write verbs
refuse (``handler_context``, ``entity_reader``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection

from asanoha.platform import telemetry
from asanoha.platform.metrics import count_replica_read
from asanoha.platform.model import HandlerDef, Registry, SessionUser, resolve_agent_exposure
from asanoha.platform.service.admission import Admission, open_request
from asanoha.platform.service.handler_context import QueryContext
from asanoha.platform.service.instruction_reads import InstructionReads
from asanoha.platform.service.observed import note_entry, observed
from asanoha.platform.service.request import EntryHandler, Request, RequestMeta
from asanoha.platform.service.secret_guard import run_guarded
from asanoha.platform.store import Database
from asanoha.platform.store.replica import ReadAfter, ReadReplica

#: Makes the context a query handler is called with, for a request, handler and caller.
QueryContextFactory = Callable[[Request, HandlerDef, SessionUser], QueryContext]


class QueryPipeline:
    """Runs queries: each handler over one read-only ``Request`` (see the module)."""

    def __init__(
        self,
        *,
        registry: Registry,
        database: Database,
        replica: ReadReplica | None,
        admission: Admission,
        context: QueryContextFactory,
    ) -> None:
        self._registry = registry
        self._database = database
        self._replica = replica
        self._admission = admission
        self._context = context
        # Resolved once per process: the registry and its definitions do not change.
        self._entries: dict[str, EntryHandler] = {}

    def query(
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
        """Run the query handler ``qn`` for ``user`` and return its data (see
        ``Service.dispatch_query``)."""
        if parent is not None:
            handler, model = self._admission.admit(
                qn, "query", payload, user, parent.conn, nested=True
            )
            context = self._context(parent, handler, user)
            return run_guarded(handler.qn, lambda: handler.func(model, context))
        with observed("query", qn, user, meta) as span:
            handler, model = self._admission.admit(qn, "query", payload, user)
            self._admission.check_rate(handler, user, meta)
            with self._reading(handler, read_after, span) as conn:
                request = open_request(
                    conn, "query", handler, user, meta, None, self._entry_of(handler)
                )
                note_entry(span, request)
                request.reads = reads
                context = self._context(request, handler, user)
                return run_guarded(handler.qn, lambda: handler.func(model, context))

    @contextmanager
    def _reading(
        self, handler: HandlerDef, read_after: ReadAfter | None, span: telemetry.Span
    ) -> Iterator[Connection]:
        """The read-only connection a top-level query reads through."""
        if self._replica is None or read_after is None or not handler.replica:
            with self._database.read_only() as conn:
                yield conn
            return
        with self._replica.read_only(read_after) as (conn, bypass):
            count_replica_read(bypass)
            span.set("db.replica", bypass is None)
            yield conn

    def _entry_of(self, handler: HandlerDef) -> EntryHandler:
        entry = self._entries.get(handler.qn)
        if entry is None or self._registry.find_handler(handler.qn) is not handler:
            entry = EntryHandler(handler.qn, resolve_agent_exposure(handler).risk)
            self._entries[handler.qn] = entry
        return entry
