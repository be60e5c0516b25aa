"""What a handler receives as ``ctx``: ``WriteContext`` for writes, ``QueryContext`` for queries."""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection

from asanoha.platform.model import EntityDef, EventDef, HandlerDef, SessionUser
from asanoha.platform.service.context import RequestContext
from asanoha.platform.service.executor import EntityExecutor, EntityReader
from asanoha.platform.store import StoredEvent

if TYPE_CHECKING:
    from asanoha.platform.service.dispatch import Service


class QueryContext:
    """Read access for a query handler: entities of the caller's tenant, other queries."""

    def __init__(
        self,
        service: Service,
        conn: Connection,
        handler: HandlerDef,
        user: SessionUser,
        request: RequestContext | None = None,
    ) -> None:
        self.service = service
        self.connection = conn
        self.handler = handler
        self.user = user
        self.request = request
        self.log = logging.getLogger(f"asanoha.handler.{handler.qn}")

    @property
    def tenant_id(self) -> str:
        """The caller's tenant (from the session, never from the payload)."""
        return self.user.tenant_id

    def entity(self, name: str) -> EntityReader:
        """Reads of entity ``name`` (of this feature) or ``feature:name``: detail, get, list."""
        return EntityReader(
            self.service,
            self.connection,
            self._entity_def(name),
            self.user,
            self.request,
            self.handler.qn,
        )

    def query(self, qn: str, payload: Any) -> Any:
        """Run another query as the same caller."""
        return self.service.dispatch_query(qn, payload, self.user)

    def _entity_def(self, name: str) -> EntityDef:
        key = name if ":" in name else f"{self.handler.feature}:{name.replace('_', '-')}"
        entity_def = self.service.registry.find_entity(key)
        if entity_def is None:
            raise LookupError(
                f"{self.handler.qn}: no entity {name!r} is registered (looked for {key!r})"
            )
        return entity_def


class WriteContext(QueryContext):
    """A write handler's context: entity writes, nested writes, domain events, job enqueues."""

    request: RequestContext

    def entity(self, name: str) -> EntityExecutor:
        """The executor of entity ``name`` (of this feature) or ``feature:name``."""
        return EntityExecutor(
            self.service,
            self.connection,
            self._entity_def(name),
            self.user,
            self.request,
            self.handler.qn,
        )

    def write(self, qn: str, payload: Any) -> Any:
        """Run another write handler as the same caller, in this transaction (a savepoint).

        The entry handler stays the one the caller invoked, so a low-risk handler cannot reach
        a gated operation by delegating to a high-risk one.
        """
        return self.service.dispatch_write(qn, payload, self.user)

    def write_as(self, user: SessionUser, qn: str, payload: Any) -> Any:
        """Like ``write``, as another user."""
        return self.service.dispatch_write(qn, payload, user)

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
        return self.service.append_domain_event(
            self.request,
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
        return self.service.enqueue_job(job_qn, payload, self.user)
