"""One delivery pass of one consumer: lock its cursor, deliver the next batch in order,
advance the cursor in the same transaction as the handlers' writes."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from asanoha.platform import telemetry
from asanoha.platform.consumers.context import ConsumerContext
from asanoha.platform.consumers.cursors import Cursor, describe_error, save_cursor
from asanoha.platform.consumers.parking import Parking
from asanoha.platform.consumers.visibility import Scan, Visibility
from asanoha.platform.model import ConsumerDef
from asanoha.platform.personal import redaction
from asanoha.platform.personal.events import reveal_event
from asanoha.platform.store import StoredEvent, Tables
from asanoha.platform.store.upcasting import upcast

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from asanoha.platform.service import Service

#: Events one pass reads at most (on Postgres: ids examined, of any type).
BATCH_SIZE = 1000


@dataclass(frozen=True)
class PassResult:
    """What a pass did."""

    name: str
    delivered: int = 0
    #: The partition the pass was for, and how many partitions its cursor row says the
    #: consumer has (``None`` when no row was locked).
    partition: int = 0
    partitions: int | None = None
    #: Another pass right away may find more: this one read a full batch, or it delivered
    #: nothing but changed the cursor (a gap's bound drawn, a gap forgotten, the position
    #: moved past other consumers' events), which the next pass carries on. A pass that
    #: delivered what it found and read less than a batch is done: what was committed
    #: after its scan waits for the next wake-up, so that a consumer that keeps up with
    #: its writers does not run pass after pass of a few events each.
    progressed: bool = False
    #: An event failed (the pass stopped there).
    failed: bool = False
    #: Another process holds the cursor; nothing was done.
    busy: bool = False
    #: The consumer is dead or disabled (in this partition): no pass delivers anything until
    #: an operator restarts, skips or enables it.
    stopped: bool = False
    #: When the next attempt at the event the consumer is stopped at may start, if it is
    #: stopped there and not dead (a pass before then does nothing).
    retry_at: dt.datetime | None = None


class HandlerReturnedAfterDatabaseError(Exception):
    """The handler returned, but its database work could not be kept: it caught a database
    error that had aborted the transaction (Postgres), so what it did is lost."""


def run_pass(
    service: Service,
    consumer: ConsumerDef,
    visibility: Visibility,
    *,
    limit: int = BATCH_SIZE,
    partition: int = 0,
) -> PassResult:
    """Deliver the next batch of ``consumer``'s events (of its ``partition``).

    A failing event stops the pass: its effects roll back (the events before it stay
    delivered), the attempt, the error and the time of the next attempt (the consumer's
    backoff) are recorded on the cursor, and after ``max_attempts`` the consumer is ``dead``
    at that event. A dead or disabled consumer, or one whose next attempt is not due, is left
    alone. An event of a tenant that switched the consumer's feature off is parked, and
    delivered first once the feature is on again (see ``parking``).
    """
    tables = service.tables
    delivered: list[ConsumerContext] = []
    with service.database.begin() as conn:
        cursor = visibility.lock(conn, tables, consumer.qn, partition)
        if cursor is None:
            return PassResult(consumer.qn, busy=True, partition=partition)
        partitions = cursor.partitions
        if cursor.status != "idle":
            return PassResult(consumer.qn, partition=partition, partitions=partitions, stopped=True)
        if cursor.waiting(dt.datetime.now(dt.UTC)):
            return PassResult(
                consumer.qn, retry_at=cursor.retry_at, partition=partition, partitions=partitions
            )
        switched = _FeatureSwitch(service, conn, consumer)
        parking = Parking(conn, tables, cursor) if switched.applies else None
        returning = _returning(parking, switched)
        backlog = parking.due(returning, limit) if parking is not None else []
        # A full batch of returning events is this pass's work; the scan waits for the next.
        scan = (
            visibility.scan(conn, tables, cursor, consumer.on, limit)
            if len(backlog) < limit
            else None
        )
        retry_at: dt.datetime | None = None
        failed = False
        parked = 0
        # A batch has as many causes as events: the pass's span links to each one's trace.
        # The error text a failing event leaves holds none of the personal values the pass
        # revealed (see ``personal.redaction``).
        with (
            telemetry.consumer_pass_span(
                consumer.qn, [*backlog, *(scan.events if scan else ())]
            ) as span,
            redaction.revealing(),
        ):
            for event in backlog:
                assert parking is not None
                ctx = ConsumerContext(service, conn, consumer, event)
                error = _deliver(conn, tables, consumer, event, ctx)
                if error is not None:
                    # Below the position already: the position and gaps stay as they are.
                    retry_at = _record_failure(conn, tables, consumer, cursor, event, error)
                    failed = True
                    span.outcome("failed", "delivery_failed")
                    break
                parking.release(event)
                delivered.append(ctx)
            if not failed and scan is not None:
                # Every returning tenant's parked events were delivered above.
                for event in scan.events:
                    if parking is not None and switched.off(event.tenant_id):
                        parking.park(event)
                        parked += 1
                        continue
                    ctx = ConsumerContext(service, conn, consumer, event)
                    error = _deliver(conn, tables, consumer, event, ctx)
                    if error is not None:
                        position, gaps = scan.until(event)
                        retry_at = _record_failure(
                            conn,
                            tables,
                            consumer,
                            cursor,
                            event,
                            error,
                            position=position,
                            gaps=gaps,
                        )
                        failed = True
                        span.outcome("failed", "delivery_failed")
                        break
                    delivered.append(ctx)
            span.set("delivered", len(delivered))
            if parked:
                span.set("parked", parked)
        moved = scan is not None and scan.changes_state
        if not failed and (moved or cursor.event_id is not None):
            save_cursor(
                conn,
                tables,
                consumer.qn,
                partition=partition,
                attempts=0,
                event_id=None,
                last_error=None,
                retry_at=None,
                **({"position": scan.position, "gaps": scan.gaps} if scan is not None else {}),
            )
    for ctx in delivered:
        ctx.after_commit()
    return PassResult(
        consumer.qn,
        delivered=len(delivered),
        progressed=not failed
        and (
            scan is None or (scan.changes_state and (not delivered or _more_waiting(scan, limit)))
        ),
        failed=failed,
        # A failure without a next attempt is the one that made it dead.
        stopped=failed and retry_at is None,
        retry_at=retry_at,
        partition=partition,
        partitions=partitions,
    )


def _returning(parking: Parking | None, switched: _FeatureSwitch) -> list[str]:
    """The tenants with parked events whose feature is on again."""
    if parking is None:
        return []
    return [tenant for tenant in sorted(parking.tenants) if not switched.off(tenant)]


def _more_waiting(scan: Scan, limit: int) -> bool:
    """Whether the scan may have left visible events unread: it read ``limit`` ids past the
    position (as far as the ids it spans tell), or it stayed at the position reading late
    events (the ids it left in the gaps are read next)."""
    return scan.position - scan.start >= limit or (bool(scan.late) and scan.position == scan.start)


def _deliver(
    conn: Connection,
    tables: Tables,
    consumer: ConsumerDef,
    event: StoredEvent,
    ctx: ConsumerContext,
) -> Exception | None:
    """Call the handler and keep its effects; return the error that rolled them back."""
    with telemetry.delivery_span(consumer.qn, event.id, event.type, event.metadata) as span:
        error = _deliver_in_span(conn, tables, consumer, event, ctx)
        if error is not None:
            span.outcome(*telemetry.outcome_of(error))
        return error


def _deliver_in_span(
    conn: Connection,
    tables: Tables,
    consumer: ConsumerDef,
    event: StoredEvent,
    ctx: ConsumerContext,
) -> Exception | None:
    try:
        # A version the code cannot read fails the delivery like a failing handler.
        consumer.func(reveal_event(conn, upcast(tables, event)), ctx)
    except Exception as error:
        ctx.finish(error)
        return error
    try:
        ctx.finish(None)
    except Exception as error:
        try:
            ctx.finish(error)
        except Exception:
            raise error from None
        if conn.invalidated:
            # The connection is gone: nothing can be recorded; the pass fails as a whole.
            raise
        return HandlerReturnedAfterDatabaseError(
            "the handler returned, but a database error it caught had aborted its "
            f"transaction: {describe_error(error)}"
        )
    return None


class _FeatureSwitch:
    """Whether the consumer's feature is off in a tenant, asked once per tenant per pass
    (only for a toggleable feature, and a consumer that follows its switch)."""

    def __init__(self, service: Service, conn: Connection, consumer: ConsumerDef) -> None:
        settings = service.feature_settings
        toggled = consumer.toggled and consumer.feature in settings.toggleable
        self._settings = settings if toggled else None
        self._conn = conn
        self._feature = consumer.feature
        self._known: dict[str, bool] = {}

    @property
    def applies(self) -> bool:
        """Whether the consumer's feature can be switched off at all."""
        return self._settings is not None

    def off(self, tenant_id: str) -> bool:
        if self._settings is None:
            return False
        if tenant_id not in self._known:
            enabled = self._settings.is_enabled(self._conn, tenant_id, self._feature)
            self._known[tenant_id] = not enabled
        return self._known[tenant_id]


def _record_failure(
    conn: Connection,
    tables: Tables,
    consumer: ConsumerDef,
    cursor: Cursor,
    event: StoredEvent,
    error: BaseException,
    **state: Any,
) -> dt.datetime | None:
    """Count the attempt at ``event`` and save the cursor with ``state`` (position, gaps);
    return when the next attempt may start (``None``: dead)."""
    attempts = cursor.attempts + 1 if cursor.event_id == event.id else 1
    dead = attempts >= consumer.max_attempts
    retry_at = None
    if not dead:
        delay = consumer.backoff.countdown(attempts)
        retry_at = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=delay)
    save_cursor(
        conn,
        tables,
        consumer.qn,
        partition=cursor.partition,
        attempts=attempts,
        event_id=event.id,
        last_error=describe_error(error),
        status="dead" if dead else "idle",
        retry_at=retry_at,
        **state,
    )
    return retry_at
