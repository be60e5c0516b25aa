"""``ConsumerContext``: what a consumer handler sees besides the event."""

from __future__ import annotations

import functools
import logging
import uuid
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection

from asanoha.platform.model import ConsumerDef, SessionUser
from asanoha.platform.model.place import Place
from asanoha.platform.service.feature_context import FeatureAccess, FeatureScope
from asanoha.platform.store import StoredEvent

if TYPE_CHECKING:
    from asanoha.platform.service import EntityExecutor, Service
    from asanoha.platform.service.raw_sql import RawSql
    from asanoha.platform.service.request import Request, RequestView

#: The savepoint of one delivery. Taken with plain SQL rather than ``begin_nested()``: when a
#: handler caught a database error, Postgres refuses the RELEASE, and SQLAlchemy then drops
#: its savepoint object without rolling back to it, leaving the pass's transaction aborted.
SAVEPOINT = "asanoha_delivery"


class ConsumerContext(FeatureAccess):
    """Platform calls of one delivery, all inside the pass's transaction.

    They run as the event tenant's system user with no entry handler (so a ``write`` makes
    the target handler the entry handler, as in jobs), and carry the origin of the write
    that appended the event: in a chain an agent began below ``high`` the gated operations
    stay refused unless the consumer declares ``acts_for_system``. Their effects commit with the cursor's advance, or not at all:
    a failing handler rolls back everything it did for this event (a savepoint, taken on
    the first call that touches the database, so a handler that only reads the event costs
    nothing). The handler sees a view of the unit of work (``request``), not its connection:
    SQL of its own goes through ``sql``, which needs ``raw_sql=`` on the decorator.
    """

    def __init__(
        self, service: Service, conn: Connection, consumer: ConsumerDef, event: StoredEvent
    ) -> None:
        # Kept small: a context is made for every event, most of which touch nothing.
        self._service = service
        self.consumer = consumer
        self.event = event
        self._conn = conn
        self._in_savepoint = False
        self._unit: AbstractContextManager[Request] | None = None
        self._request: Request | None = None

    @property
    def tenant_id(self) -> str:
        """The tenant of the event being delivered."""
        return self.event.tenant_id

    @functools.cached_property
    def system_user(self) -> SessionUser:
        """The tenant's system user, who the context's calls run as."""
        return SessionUser.system(self.event.tenant_id)

    def _feature_scope(self) -> FeatureScope:
        # In the pass's transaction; a consumer has no caller to ask for a place: the
        # tenant's locale and zone hold.
        return FeatureScope(
            self._service.feature_settings,
            self._service.database,
            self.event.tenant_id,
            self.consumer.feature,
            self._conn,
            Place(),
        )

    @functools.cached_property
    def log(self) -> logging.LoggerAdapter[logging.Logger]:
        """A logger naming the consumer and the event."""
        return logging.LoggerAdapter(
            logging.getLogger(f"asanoha.consumer.{self.consumer.qn}"),
            {"consumer": self.consumer.qn, "event_id": self.event.id},
        )

    def write(self, qn: str, payload: Any) -> Any:
        """Run the write handler ``qn`` as the tenant's system user."""
        return self.write_as(self.system_user, qn, payload)

    def write_as(self, user: SessionUser, qn: str, payload: Any) -> Any:
        """Run the write handler ``qn`` as ``user``."""
        return self._service.dispatch_write(qn, payload, user, parent=self._unit_request())

    def query_as(self, user: SessionUser, qn: str, payload: Any) -> Any:
        """Run the query handler ``qn`` as ``user`` (it sees this pass's writes)."""
        return self._service.dispatch_query(qn, payload, user, parent=self._unit_request())

    def entity(self, name: str) -> EntityExecutor:
        """The executor of entity ``name`` (of the consumer's feature) or ``feature:name``."""
        return self._service.executor(
            self._unit_request(),
            name,
            self.system_user,
            feature=self.consumer.feature,
            caller=self.consumer.qn,
        )

    def dispatch(self, job_qn: str, payload: dict[str, Any]) -> uuid.UUID:
        """Enqueue the job ``job_qn``; it is published once the pass commits."""
        return self._service.enqueue_job(
            job_qn,
            payload,
            self.system_user,
            parent=self._unit_request(),
            trigger_name=self.consumer.qn,
        )

    @property
    def request(self) -> RequestView:
        """The unit of work of this delivery (origin, ids), opened on first use."""
        return self._unit_request().view()

    @property
    def sql(self) -> RawSql:
        """SQL on the consumer's own tables, in this delivery's savepoint (rolled back with
        it). Needs ``raw_sql="<reason>"`` on the decorator; entity and platform tables are
        refused (see ``service/raw_sql.py``)."""
        from asanoha.platform.service.raw_sql import open_raw_sql

        return open_raw_sql(
            self._unit_request().conn,
            self._service.tables,
            self.consumer.qn,
            self.consumer.raw_sql,
            read_only=False,
        )

    def _unit_request(self) -> Request:
        """The unit of work of this delivery, opened on first use."""
        if self._request is None:
            from asanoha.platform.service.request import Acting, RequestMeta, WriteOrigin

            self._conn.exec_driver_sql(f"SAVEPOINT {SAVEPOINT}")
            self._in_savepoint = True
            metadata = self.event.metadata
            self._unit = self._service.unit_of_work(
                self.system_user,
                origin=WriteOrigin.from_header(metadata.get("origin")),
                meta=RequestMeta(
                    correlation_id=metadata.get("correlation_id"),
                    causation_id=f"event:{self.event.id}",
                ),
                conn=self._conn,
                acting=Acting(self.consumer.qn, self.consumer.acts_for_system),
            )
            self._request = self._unit.__enter__()
        return self._request

    # -- for the pass -----------------------------------------------------------------------

    def finish(self, error: BaseException | None) -> None:
        """Keep this delivery's effects (``error`` is ``None``) or roll them back.

        Called again with the error when keeping them failed (a handler that caught a
        database error leaves the transaction aborted, and the savepoint's release fails):
        the second call only rolls the savepoint back.
        """
        unit, self._unit = self._unit, None
        if unit is not None:
            if error is None:
                unit.__exit__(None, None, None)
            else:
                unit.__exit__(type(error), error, error.__traceback__)
        if not self._in_savepoint:
            return
        if error is None:
            self._conn.exec_driver_sql(f"RELEASE SAVEPOINT {SAVEPOINT}")
        else:
            # Also clears a transaction a caught database error left aborted.
            self._conn.exec_driver_sql(f"ROLLBACK TO SAVEPOINT {SAVEPOINT}")
            self._conn.exec_driver_sql(f"RELEASE SAVEPOINT {SAVEPOINT}")
        self._in_savepoint = False

    def after_commit(self) -> None:
        """Publish the jobs this delivery enqueued and announce its events (pass committed)."""
        if self._request is not None:
            self._service.after_commit(self._request)


def platform_unit(ctx: ConsumerContext) -> tuple[Service, Request]:
    """The service and the delivery's unit of work, for the platform's own consumers (the
    job-trigger consumer enqueues with an idempotency key). Refused for a consumer defined
    outside the ``asanoha`` package."""
    from asanoha.platform.service.handler_context import is_platform_code

    if not is_platform_code(ctx.consumer.func):
        raise RuntimeError(
            f"{ctx.consumer.qn}: platform_unit() serves the platform's own consumers only; "
            'declare raw_sql="<reason>" and use ctx.sql for SQL on your own tables'
        )
    return ctx._service, ctx._unit_request()
