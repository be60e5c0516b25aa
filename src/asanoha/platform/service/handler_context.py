"""What a handler receives as ``ctx``: ``WriteContext`` for writes, ``QueryContext`` for queries.

A context carries the handler's ``Request`` and hands it on explicitly to every call it makes,
so a nested write keeps the entry handler and origin even when it runs on another thread.
"""

from __future__ import annotations

import functools
import logging
import uuid
from typing import TYPE_CHECKING, Any

from asanoha.platform.model import EventDef, HandlerDef, SessionUser
from asanoha.platform.service import gates
from asanoha.platform.service.executor import EntityExecutor, EntityReader
from asanoha.platform.service.request import Request
from asanoha.platform.store import StoredEvent

if TYPE_CHECKING:
    from asanoha.platform.service.dispatch import Service


class QueryContext:
    """Read access for a query handler: entities of the caller's tenant, other queries."""

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
    def request(self) -> Request:
        """The request this handler runs in (entry handler, origin, ids)."""
        return self._request

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

    def query(self, qn: str, payload: Any) -> Any:
        """Run another query as the same caller, in this request."""
        return self._service.dispatch_query(qn, payload, self.user, parent=self._request)


class WriteContext(QueryContext):
    """A write handler's context: entity writes, nested writes, domain events, job enqueues."""

    def entity(self, name: str) -> EntityExecutor:
        """The executor of entity ``name`` (of this feature) or ``feature:name``."""
        return self._service.executor(
            self._request, name, self.user, feature=self.handler.feature, caller=self.handler.qn
        )

    def write(self, qn: str, payload: Any) -> Any:
        """Run another write handler as the same caller, in this transaction (a savepoint).

        The entry handler stays the one the caller invoked, so a low-risk handler cannot reach
        a gated operation by delegating to a high-risk one.
        """
        return self._service.dispatch_write(qn, payload, self.user, parent=self._request)

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
        return self._service.append_domain_event(
            self._request,
            self.user,
            self.handler,
            event,
            payload,
            stream_id=str(stream_id),
            stream_type=stream_type,
            expected_version=expected_version,
        )

    def dispatch(self, job_qn: str, payload: dict[str, Any]) -> uuid.UUID:
        """Enqueue a job; it is published only if this write commits."""
        return self._service.enqueue_job(
            job_qn, payload, self.user, parent=self._request, trigger_name=self.handler.qn
        )
