"""``Consumers``: the consumers of an application (``app.consumers``), advanced in-process by
``run_once`` and by the Celery driver; status and operations."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from sqlalchemy import func, select

from asanoha.platform.consumers import operations
from asanoha.platform.consumers.cursors import register_cursors
from asanoha.platform.consumers.job_triggers import consumer_definitions
from asanoha.platform.consumers.operations import ConsumerStatus
from asanoha.platform.consumers.passes import BATCH_SIZE, PassResult, run_pass
from asanoha.platform.consumers.visibility import visibility_for
from asanoha.platform.errors import NotFoundError, Reasons
from asanoha.platform.model import ConsumerDef
from asanoha.platform.store import StoredEvent

if TYPE_CHECKING:
    from asanoha.platform.service import Service


class Consumers:
    """Every consumer of one application, the job-trigger consumer included."""

    def __init__(self, service: Service, *, batch_size: int = BATCH_SIZE) -> None:
        self._service = service
        self._batch_size = batch_size
        self._visibility = visibility_for(service.database.dialect)
        #: Every consumer, the built-in job-trigger consumer last.
        self.definitions: tuple[ConsumerDef, ...] = consumer_definitions(service.registry)
        self._by_name = {consumer.qn: consumer for consumer in self.definitions}
        self._followed = frozenset(t for consumer in self.definitions for t in consumer.on)
        self._registered = False

    def __bool__(self) -> bool:
        return bool(self.definitions)

    @property
    def names(self) -> tuple[str, ...]:
        """The QNs of every consumer."""
        return tuple(self._by_name)

    @property
    def user_defined(self) -> tuple[ConsumerDef, ...]:
        """The consumers the application's features declare (not the built-in one)."""
        return self._service.registry.consumers

    def follows(self, events: Iterable[StoredEvent]) -> bool:
        """Whether any consumer follows any of ``events``' types."""
        return any(event.type in self._followed for event in events)

    # -- delivery ---------------------------------------------------------------------------

    def register(self) -> None:
        """Create the cursor rows of consumers that have none (idempotent)."""
        if not self.definitions:
            return
        database = self._service.database
        with database.begin() as conn:
            register_cursors(conn, database.backend, self._service.tables, self.definitions)

    def advance(self, name: str) -> PassResult:
        """Run one pass of the consumer ``name``."""
        return run_pass(
            self._service, self._definition(name), self._visibility, limit=self._batch_size
        )

    def run_once(self, names: Sequence[str] | None = None) -> int:
        """Advance every consumer (or those named) until it has caught up, is stopped at a
        failing event, or another process holds it; return how many events were delivered.

        A failing event is tried once per call, so repeated calls (the driver, ``drain``)
        count its attempts.
        """
        self._ensure_registered()
        delivered = 0
        for name in names or self.names:
            while True:
                result = self.advance(name)
                delivered += result.delivered
                if result.busy or result.failed or not result.progressed:
                    break
        return delivered

    # -- operations -------------------------------------------------------------------------

    def status(self) -> list[ConsumerStatus]:
        """Position, lag, status, attempts and last error of every consumer."""
        self._ensure_registered()
        with self._service.database.connect() as conn:
            return operations.consumer_statuses(conn, self._service.tables, self.names)

    def behind(self) -> list[ConsumerStatus]:
        """Consumers (not disabled) with committed events of their types still to handle."""
        return [s for s in self.status() if s.lag > 0 and s.status != "disabled"]

    def restart(self, name: str) -> None:
        """A dead consumer tries its failing event again, with fresh attempts."""
        self._operate(name, operations.restart_consumer)

    def skip(self, name: str) -> int:
        """Move the consumer past the event it is stopped at (recorded); return its id."""
        self._definition(name)
        with self._service.database.begin() as conn:
            return operations.skip_event(conn, self._service.tables, name)

    def disable(self, name: str) -> None:
        """Stop delivering to the consumer until ``enable``."""
        self._operate(name, operations.disable_consumer)

    def enable(self, name: str) -> None:
        """Resume a disabled consumer."""
        self._operate(name, operations.enable_consumer)

    # -- pieces -----------------------------------------------------------------------------

    def _operate(self, name: str, operation: operations.Operation) -> None:
        self._definition(name)
        with self._service.database.begin() as conn:
            operation(conn, self._service.tables, name)

    def _definition(self, name: str) -> ConsumerDef:
        consumer = self._by_name.get(name)
        if consumer is None:
            raise NotFoundError(Reasons.CONSUMER_NOT_FOUND, consumer=name)
        return consumer

    def _ensure_registered(self) -> None:
        if not self.definitions:
            return
        if not self._registered:
            # Once per process: new rows, and event types in step with the definitions.
            self.register()
            self._registered = True
            return
        # Cheap enough to ask every time, and it survives a test stack's reset().
        consumers = self._service.tables.consumers
        query = select(func.count()).where(consumers.c.name.in_(self.names))
        with self._service.database.connect() as conn:
            present = int(conn.execute(query).scalar_one())
        if present < len(self.definitions):
            self.register()
