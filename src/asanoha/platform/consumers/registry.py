"""``Consumers``: the consumers of an application (``app.consumers``), advanced in-process by
``run_once`` and by the Celery driver; status and operations."""

from __future__ import annotations

import dataclasses
import datetime as dt
import threading
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import func, select

from asanoha.platform.consumers import operations, wakes
from asanoha.platform.consumers.job_triggers import consumer_definitions
from asanoha.platform.consumers.operations import ConsumerStatus
from asanoha.platform.consumers.passes import BATCH_SIZE, PassResult, run_pass
from asanoha.platform.consumers.registration import register_cursors
from asanoha.platform.consumers.repartition import repartition_consumer
from asanoha.platform.consumers.visibility import visibility_for
from asanoha.platform.consumers.wakes import Wake
from asanoha.platform.errors import NotFoundError, Reasons
from asanoha.platform.model import ConsumerDef
from asanoha.platform.store import StoredEvent
from asanoha.platform.store.events import partition_key

if TYPE_CHECKING:
    from asanoha.platform.service import Service


@dataclass(frozen=True)
class Round:
    """What one round over the consumers did (``Consumers.run``)."""

    delivered: int = 0
    #: Consumers another process (or an operation) held, so this round did nothing for them
    #: (a partition of one held is enough).
    busy: tuple[str, ...] = ()
    #: The earliest time a consumer stopped at a failing event may try it again.
    next_attempt_at: dt.datetime | None = None


@dataclass(frozen=True)
class RunningPass:
    """A pass that this process is running now."""

    name: str
    #: Seconds since it started.
    seconds: float
    #: The consumer's partition it delivers.
    partition: int = 0


class Consumers:
    """Every consumer of one application, the job-trigger consumer included."""

    def __init__(
        self,
        service: Service,
        *,
        batch_size: int = BATCH_SIZE,
        job_trigger_partitions: int | None = None,
    ) -> None:
        self._service = service
        self._batch_size = batch_size
        self._visibility = visibility_for(service.database.dialect)
        #: Every consumer, the built-in job-trigger consumer last.
        self.definitions: tuple[ConsumerDef, ...] = consumer_definitions(
            service.registry, job_trigger_partitions
        )
        self._by_name = {consumer.qn: consumer for consumer in self.definitions}
        self._followed = frozenset(t for consumer in self.definitions for t in consumer.on)
        self._registered = False
        # Passes in progress in this process, by thread: what a drain that timed out names.
        self._running: dict[int, tuple[str, int, float]] = {}
        self._running_lock = threading.Lock()
        # Partitions of each consumer as its rows said last (every pass reads them).
        self._partitions: dict[str, int] = {}

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

    def wake_keys(self, events: Iterable[StoredEvent]) -> dict[str, frozenset[int]]:
        """For each consumer that follows any of ``events``, the partition keys of the
        events it follows: a write wakes only the partitions they go to."""
        keys: dict[str, set[int]] = {}
        for event in events:
            key = partition_key(event.tenant_id, event.stream_id)
            for consumer in self.definitions:
                if event.type in consumer.on:
                    keys.setdefault(consumer.qn, set()).add(key)
        return {name: frozenset(held) for name, held in keys.items()}

    # -- wake-ups (see ``wakes``) -----------------------------------------------------------

    def arm_wakes(
        self,
        names: Sequence[str] | None = None,
        *,
        until: dt.datetime,
        partition: int | None = None,
        keys: Mapping[str, Collection[int]] | None = None,
    ) -> list[Wake]:
        """Ask for a wake-up of every partition of ``names`` (every consumer by default), or
        of ``partition`` only, or of the partitions that own ``keys[name]`` (``wake_keys``);
        return the wake-ups the caller must publish (none for a partition whose wake-up is
        pending or running already)."""
        chosen = self.names if names is None else tuple(names)
        if not chosen:
            return []
        self._ensure_registered()
        now = dt.datetime.now(dt.UTC)
        return wakes.arm_wakes(
            self._service.database,
            self._service.tables,
            chosen,
            until=until,
            now=now,
            partition=partition,
            keys=keys,
        )

    def begin_wake(self, wake: Wake, until: dt.datetime) -> bool:
        """Start the first round of ``wake``'s task; ``False``: the partition is another
        task's now."""
        with self._service.database.begin() as conn:
            return wakes.begin_round(conn, self._service.tables, wake, until)

    def end_wake_round(self, wake: Wake, until: dt.datetime) -> bool:
        """End a round of ``wake``'s task; ``True``: a write came meanwhile, run another
        (its beginning is done)."""
        with self._service.database.begin() as conn:
            return wakes.end_round(conn, self._service.tables, wake, until)

    def hold_wake(self, wake: Wake, until: dt.datetime) -> bool:
        """Keep ``wake``'s row until ``until``; ``False`` when it is gone."""
        with self._service.database.begin() as conn:
            return wakes.hold_wake(conn, self._service.tables, wake, until)

    def drop_wake(self, wake: Wake) -> None:
        """Forget ``wake`` (its task could not be published)."""
        with self._service.database.begin() as conn:
            wakes.drop_wake(conn, self._service.tables, wake)

    # -- delivery ---------------------------------------------------------------------------

    def register(self) -> None:
        """Create the cursor rows of consumers that have none (idempotent)."""
        if not self.definitions:
            return
        database = self._service.database
        with database.begin() as conn:
            register_cursors(
                conn, database.backend, self._service.tables, self.definitions, self._visibility
            )

    def advance(self, name: str, partition: int = 0) -> PassResult:
        """Run one pass of the consumer ``name`` (of its ``partition``)."""
        definition = self._definition(name)
        thread = threading.get_ident()
        with self._running_lock:
            self._running[thread] = (name, partition, time.monotonic())
        try:
            result = run_pass(
                self._service,
                definition,
                self._visibility,
                limit=self._batch_size,
                partition=partition,
            )
        finally:
            with self._running_lock:
                self._running.pop(thread, None)
        if result.partitions is not None:
            self._partitions[name] = result.partitions
        return result

    def partitions(self, name: str) -> int:
        """How many partitions the consumer ``name`` has, as its rows said last."""
        found = self._partitions.get(name)
        if found is None:
            consumers = self._service.tables.consumers
            query = select(func.count()).where(consumers.c.name == name)
            with self._service.database.connect() as conn:
                found = max(1, int(conn.execute(query).scalar_one()))
            self._partitions[name] = found
        return found

    def run_once(self, names: Sequence[str] | None = None) -> int:
        """Advance every consumer (or those named) until it has caught up, is stopped at a
        failing event, or another process holds it; return how many events were delivered.

        A failing event is tried once per call, and not before its next attempt is due (the
        consumer's backoff), so repeated calls (the driver, ``drain``) count its attempts.
        """
        return self.run(names).delivered

    def run(self, names: Sequence[str] | None = None) -> Round:
        """``run_once``, telling the driver what it left: the consumers another process held
        and the earliest next attempt at a failing event."""
        self._ensure_registered()
        delivered = 0
        busy: list[str] = []
        retries: list[dt.datetime] = []
        for name in names or self.names:
            partition = 0
            # The count is read again after every pass (a repartition may change it).
            while partition < self.partitions(name):
                result = self._catch_up(name, partition)
                delivered += result.delivered
                if result.busy and name not in busy:
                    busy.append(name)
                if result.retry_at is not None:
                    retries.append(result.retry_at)
                partition += 1
        return Round(delivered, tuple(busy), min(retries, default=None))

    def run_partition(self, name: str, partition: int = 0) -> PassResult:
        """Advance one partition of ``name`` until it has caught up, is stopped at a failing
        event, or another process holds it; the totals of its passes."""
        self._ensure_registered()
        return self._catch_up(name, partition)

    def _catch_up(self, name: str, partition: int) -> PassResult:
        delivered = 0
        while True:
            result = self.advance(name, partition)
            delivered += result.delivered
            if result.busy or result.failed or not result.progressed:
                return dataclasses.replace(result, delivered=delivered)

    def running(self) -> list[RunningPass]:
        """The passes this process is running now, oldest first."""
        now = time.monotonic()
        with self._running_lock:
            found = sorted(self._running.values(), key=lambda item: item[2])
        return [RunningPass(name, now - started, partition) for name, partition, started in found]

    # -- operations -------------------------------------------------------------------------

    def status(self) -> list[ConsumerStatus]:
        """Position, lag, status, attempts and last error of every consumer."""
        self._ensure_registered()
        with self._service.database.connect() as conn:
            return operations.consumer_statuses(conn, self._service.tables, self.names)

    def behind(self) -> list[ConsumerStatus]:
        """Consumers with committed events of their types still to handle in a partition that
        is not disabled."""
        return [s for s in self.status() if s.behind]

    def restart(self, name: str, partition: int | None = None) -> None:
        """A consumer stopped at an event (dead, or waiting for its next attempt) tries it
        again at once, with fresh attempts (every stopped partition, or ``partition``);
        ``ConflictError`` (``consumer_not_stopped``) when it is stopped at none."""
        self._operate(name, operations.restart_consumer, partition)

    def skip(self, name: str, partition: int | None = None) -> int:
        """Move the consumer past the event it is stopped at (recorded); return its id (every
        stopped partition skips its event unless ``partition`` is given: the lowest id).
        ``ConflictError`` (``consumer_not_stopped``) when it is stopped at none."""
        self._definition(name)
        self._ensure_registered()
        with self._service.database.begin() as conn:
            return operations.skip_event(conn, self._service.tables, name, partition)

    def disable(self, name: str, partition: int | None = None) -> None:
        """Stop delivering to the consumer (or its ``partition``) until ``enable``
        (idempotent)."""
        self._operate(name, operations.disable_consumer, partition)

    def enable(self, name: str, partition: int | None = None) -> None:
        """Resume a disabled consumer (or its ``partition``) as it was before (idempotent):
        one that was dead stays dead at its event until ``restart`` or ``skip``."""
        self._operate(name, operations.enable_consumer, partition)

    def repartition(self, name: str, partitions: int) -> int:
        """Give the consumer ``partitions`` cursors, stopping it at a common position in one
        transaction (see ``repartition``); return how many it had. ``ConflictError``
        (``consumer_stopped``) when a partition is stopped at a failing event."""
        self._definition(name)
        self._ensure_registered()
        database = self._service.database
        with database.begin() as conn:
            before = repartition_consumer(
                conn, database.backend, self._service.tables, name, partitions
            )
        self._partitions[name] = partitions
        return before

    # -- pieces -----------------------------------------------------------------------------

    def _operate(
        self, name: str, operation: operations.Operation, partition: int | None = None
    ) -> None:
        self._definition(name)
        self._ensure_registered()
        with self._service.database.begin() as conn:
            operation(conn, self._service.tables, name, partition)

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
        query = select(func.count()).where(
            consumers.c.name.in_(self.names), consumers.c.partition == 0
        )
        with self._service.database.connect() as conn:
            present = int(conn.execute(query).scalar_one())
        if present < len(self.definitions):
            self.register()
