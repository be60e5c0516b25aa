"""What a handler receives as ``ctx``: ``WriteContext`` for writes, ``QueryContext`` for queries.

A context carries the handler's ``Request`` and hands it on explicitly to every call it makes,
so a nested write keeps the entry handler and origin even when it runs on another thread.
The handler itself sees only a view of it (``ctx.request``): the connection stays inside the
service layer, and SQL of the handler's own goes through ``ctx.sql`` (``raw_sql.py``).
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from asanoha.platform.model import EventDef, HandlerDef, Registry, SessionUser
from asanoha.platform.model.canvas import CANVAS_QN, Canvas
from asanoha.platform.service import cross_tenant, gates
from asanoha.platform.service.aggregates import AsOf, Loaded
from asanoha.platform.service.entity_reader import EntityReader
from asanoha.platform.service.executor import EntityExecutor
from asanoha.platform.service.feature_context import FeatureAccess, FeatureScope
from asanoha.platform.service.feature_settings import FeatureSettings
from asanoha.platform.service.raw_sql import RawSql, open_raw_sql
from asanoha.platform.service.request import Request, RequestView
from asanoha.platform.store import StoredEvent

if TYPE_CHECKING:
    from asanoha.platform.service.dispatch import Service
    from asanoha.platform.service.jobs import Jobs
    from asanoha.platform.service.workflows import Workflows


class QueryContext(FeatureAccess):
    """Read access for a query handler: entities of the caller's tenant, other queries,
    aggregates (``load``).

    A query changes nothing: ``write``, ``write_as``, ``append_event`` and ``dispatch``
    exist here only to answer 403 ``write_in_query_denied`` naming the handler (as the
    write verbs of ``ctx.entity(...)`` do), before anything is read or validated; a
    ``WriteContext`` does them.
    """

    def __init__(
        self, service: Service, request: Request, handler: HandlerDef, user: SessionUser
    ) -> None:
        self._service = service
        self._request = request
        self.handler = handler
        self.user = user

    @functools.cached_property
    def log(self) -> logging.Logger:
        """The handler's logger (``asanoha.handler.<qn>``)."""
        return logging.getLogger(f"asanoha.handler.{self.handler.qn}")

    @property
    def request(self) -> RequestView:
        """The request this handler runs in (caller, entry handler, origin, ids)."""
        return self._request.view()

    @property
    def sql(self) -> RawSql:
        """SQL on the handler's own tables, in this request's transaction (a query handler's
        only reads). Needs ``raw_sql="<reason>"`` on the decorator; entity and platform tables
        are refused (see ``service/raw_sql.py``)."""
        return open_raw_sql(
            self._request.conn,
            self._service.tables,
            self.handler.qn,
            self.handler.raw_sql,
            read_only=self.handler.kind == "query",
        )

    def _feature_scope(self) -> FeatureScope:
        return FeatureScope(
            self._service.feature_settings,
            self._service.database,
            self.user.tenant_id,
            self.handler.feature,
            self._request.conn,
            self._request.meta.place_of(self.user),
        )

    @property
    def tenant_id(self) -> str:
        """The caller's tenant (from the session, never from the payload)."""
        return self.user.tenant_id

    @property
    def in_operator_tenant(self) -> bool:
        """Whether the caller's tenant is the one that operates the whole application
        (``ASANOHA_OPERATOR_TENANT``), for what every tenant shares, such as consumers."""
        operator = self._service.operator_tenant
        return operator is not None and self.user.tenant_id == operator

    def entity(self, name: str) -> EntityReader:
        """Reads of entity ``name`` (of this feature) or ``feature:name``: detail, get, list."""
        return self._service.reader(
            self._request, name, self.user, feature=self.handler.feature, caller=self.handler.qn
        )

    def tenant_entity(self, name: str, tenant_id: str, *, reason: str) -> EntityReader:
        """Reads of entity ``name`` in another tenant, ``tenant_id``, as the caller: only in
        a feature declared ``system_scope=``, each call leaving an audit event in that
        tenant (see ``service/cross_tenant.py``); else 403 ``cross_tenant_read_denied``."""
        return cross_tenant.tenant_reader(
            self._service, self._request, self.handler, self.user, name, tenant_id, reason
        )

    def query(self, qn: str, payload: Any) -> Any:
        """Run another query as the same caller, in this request."""
        return self._service.dispatch_query(qn, payload, self.user, parent=self._request)

    # A query handler that tries to write is refused, whichever request it runs in (a write
    # handler's ctx.query included): the query is what agents see as read-only.

    def write(self, qn: str, payload: Any, *, idempotency_key: str | None = None) -> Any:
        """Refused in a query: 403 ``write_in_query_denied``."""
        raise gates.write_in_query_denied(self.handler.qn, "write", qn)

    def write_as(self, user: SessionUser, qn: str, payload: Any) -> Any:
        """Refused in a query: 403 ``write_in_query_denied``."""
        raise gates.write_in_query_denied(self.handler.qn, "write_as", qn)

    def append_event(
        self,
        event: EventDef | str,
        payload: Any,
        *,
        stream_id: str | uuid.UUID,
        stream_type: str | None = None,
        expected_version: int | None = None,
    ) -> StoredEvent:
        """Refused in a query: 403 ``write_in_query_denied``."""
        qn = event.qn if isinstance(event, EventDef) else str(event)
        raise gates.write_in_query_denied(self.handler.qn, "append_event", qn)

    def dispatch(self, job_qn: str, payload: dict[str, Any]) -> uuid.UUID:
        """Refused in a query: 403 ``write_in_query_denied``."""
        raise gates.write_in_query_denied(self.handler.qn, "dispatch", job_qn)

    def start_workflow(
        self, workflow_qn: str | Canvas, payload: dict[str, Any] | None = None
    ) -> uuid.UUID:
        """Refused in a query: 403 ``write_in_query_denied``."""
        qn = workflow_qn if isinstance(workflow_qn, str) else CANVAS_QN
        raise gates.write_in_query_denied(self.handler.qn, "start_workflow", qn)

    def load(self, aggregate: str, stream_id: str | uuid.UUID, *, as_of: AsOf | None = None) -> Any:
        """The state of aggregate ``aggregate`` (of this feature, or ``feature:name``)
        folded from the events of ``stream_id`` in the caller's tenant, opened and upcast:
        ``None`` for a stream without events. ``as_of``: the state at that global position
        (an event id) or time (an aware datetime). In a query it only reads: the loads of
        writes and jobs keep snapshots."""
        return self._load(aggregate, str(stream_id), as_of).state

    def _load(self, aggregate: str, stream_id: str, as_of: AsOf | None) -> Loaded:
        aggregates = self._service.aggregates
        found = aggregates.find(aggregate, feature=self.handler.feature, caller=self.handler.qn)
        return aggregates.load(
            self._request.conn,
            found,
            tenant_id=self.user.tenant_id,
            stream_id=stream_id,
            as_of=as_of,
            read_only=self.handler.kind == "query",
        )


class WriteContext(QueryContext):
    """A write handler's context: entity writes, nested writes, domain events, job enqueues."""

    def entity(self, name: str) -> EntityExecutor:
        """The executor of entity ``name`` (of this feature) or ``feature:name``."""
        return self._service.executor(
            self._request, name, self.user, feature=self.handler.feature, caller=self.handler.qn
        )

    def write(self, qn: str, payload: Any, *, idempotency_key: str | None = None) -> Any:
        """Run another write handler as the same caller, in this transaction (a savepoint).

        The entry handler stays the one the caller invoked, so a low-risk handler cannot reach
        a gated operation by delegating to a high-risk one. ``idempotency_key``: a repeat
        with the same key and payload answers the first outcome and writes nothing.
        """
        return self._service.dispatch_write(
            qn, payload, self.user, parent=self._request, idempotency_key=idempotency_key
        )

    def write_as(self, user: SessionUser, qn: str, payload: Any) -> Any:
        """Like ``write``, as ``user``: the caller's tenant with a subset of the caller's roles,
        unless this handler declares ``identity_switch`` (or ``system_identity``)."""
        gates.check_identity_switch(self.handler, self.user, user)
        return self._service.dispatch_write(qn, payload, user, parent=self._request)

    def append_event(
        self,
        event: EventDef | str,
        payload: Any,
        *,
        stream_id: str | uuid.UUID,
        stream_type: str | None = None,
        expected_version: int | None = None,
    ) -> StoredEvent:
        """Append a declared domain event to a stream in this transaction."""
        return self._service.domain_events.append(
            self._request,
            self.user,
            self.handler,
            event,
            payload,
            stream_id=str(stream_id),
            stream_type=stream_type,
            expected_version=expected_version,
        )

    def fetch_for_writing(self, aggregate: str, stream_id: str | uuid.UUID) -> Any:
        """``load``, holding the version read: the events this handler then appends to the
        stream (``append_event`` without ``expected_version``) follow it, and a concurrent
        append in between answers 409 ``version_conflict``."""
        loaded = self._load(aggregate, str(stream_id), None)
        self._request.held_versions[self.user.tenant_id, str(stream_id)] = loaded.version
        return loaded.state

    def dispatch(self, job_qn: str, payload: dict[str, Any]) -> uuid.UUID:
        """Enqueue a job; it is published only if this write commits."""
        return self._service.enqueue_job(
            job_qn, payload, self.user, parent=self._request, trigger_name=self.handler.qn
        )

    def start_workflow(
        self, workflow_qn: str | Canvas, payload: dict[str, Any] | None = None
    ) -> uuid.UUID:
        """Start a run of the workflow ``workflow_qn`` on ``payload`` in this transaction
        (its steps run only if this write commits); the run's id."""
        return self._service.start_workflow(
            workflow_qn, payload, self.user, parent=self._request, trigger_name=self.handler.qn
        )


def is_platform_code(func: Callable[..., Any]) -> bool:
    """Whether ``func`` is defined in the ``asanoha`` package (the bundled features)."""
    return str(getattr(func, "__module__", "")).startswith("asanoha.")


def platform_request(ctx: QueryContext) -> Request:
    """The request with its connection, for the platform's bundled handlers
    (``asanoha.handlers``): they operate the platform's own tables (consumer cursors, job
    rows, approvals), which ``ctx.sql`` refuses. Refused for a handler defined elsewhere:
    application code declares ``raw_sql=`` and uses ``ctx.sql``."""
    if not is_platform_code(ctx.handler.func):
        raise RuntimeError(
            f"{ctx.handler.qn}: platform_request() serves the platform's bundled handlers "
            'only; declare raw_sql="<reason>" and use ctx.sql for SQL on your own tables'
        )
    return ctx._request


def platform_registry(ctx: QueryContext) -> Registry:
    """The application's definitions, for the platform's bundled handlers: which jobs it
    still declares, say. Refused for a handler defined elsewhere, as ``platform_request``."""
    platform_request(ctx)
    return ctx._service.registry


def platform_jobs(ctx: QueryContext) -> Jobs:
    """The application's job operations (``App.jobs``), for the platform's bundled
    handlers; they act inside the handler's request (``within=``). Refused for a handler
    defined elsewhere, as ``platform_request``."""
    from asanoha.platform.service.jobs import Jobs

    platform_request(ctx)
    return Jobs(ctx._service, ctx.tenant_id)


def platform_workflows(ctx: QueryContext) -> Workflows:
    """The application's workflow runs (``App.workflows``), for the platform's bundled
    handlers; they act inside the handler's request (``within=``). Refused for a handler
    defined elsewhere, as ``platform_request``."""
    from asanoha.platform.service.workflows import Workflows

    platform_request(ctx)
    return Workflows(ctx._service, ctx.tenant_id)


def platform_settings(ctx: QueryContext) -> FeatureSettings:
    """Features' configuration, secrets and switches, for the platform's bundled handlers
    (``config``, ``secrets``). Refused for a handler defined elsewhere, as
    ``platform_request``: application code reads its own through ``ctx.config``."""
    platform_request(ctx)
    return ctx._service.feature_settings
