"""One delivery pass of one consumer: lock its cursor, deliver the next batch in order,
advance the cursor in the same transaction as the handlers' writes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from asanoha.platform.consumers.context import ConsumerContext
from asanoha.platform.consumers.cursors import describe_error, save_cursor
from asanoha.platform.consumers.visibility import Visibility
from asanoha.platform.model import ConsumerDef

if TYPE_CHECKING:
    from asanoha.platform.service import Service

#: Events one pass reads at most (on Postgres: ids examined, of any type).
BATCH_SIZE = 1000


@dataclass(frozen=True)
class PassResult:
    """What a pass did."""

    name: str
    delivered: int = 0
    #: The cursor moved or its gaps changed: another pass may find more.
    progressed: bool = False
    #: An event failed (the pass stopped there).
    failed: bool = False
    #: Another process holds the cursor; nothing was done.
    busy: bool = False


def run_pass(
    service: Service, consumer: ConsumerDef, visibility: Visibility, *, limit: int = BATCH_SIZE
) -> PassResult:
    """Deliver the next batch of ``consumer``'s events.

    A failing event stops the pass: its effects roll back (the events before it stay
    delivered), the attempt and error are recorded on the cursor, and after ``max_attempts``
    the consumer is ``dead`` at that event. A dead or disabled consumer is left alone.
    """
    tables = service.tables
    delivered: list[ConsumerContext] = []
    with service.database.begin() as conn:
        cursor = visibility.lock(conn, tables, consumer.qn)
        if cursor is None:
            return PassResult(consumer.qn, busy=True)
        if cursor.status != "idle":
            return PassResult(consumer.qn)
        scan = visibility.scan(conn, tables, cursor, consumer.on, limit)
        failed = False
        for event in scan.events:
            ctx = ConsumerContext(service, conn, consumer, event)
            try:
                consumer.func(event, ctx)
            except Exception as error:
                ctx.finish(error)
                attempts = cursor.attempts + 1 if cursor.event_id == event.id else 1
                position, gaps = scan.until(event)
                save_cursor(
                    conn,
                    tables,
                    consumer.qn,
                    position=position,
                    gaps=gaps,
                    attempts=attempts,
                    event_id=event.id,
                    last_error=describe_error(error),
                    status="dead" if attempts >= consumer.max_attempts else "idle",
                )
                failed = True
                break
            ctx.finish(None)
            delivered.append(ctx)
        if not failed and (scan.changes_state or cursor.event_id is not None):
            save_cursor(
                conn,
                tables,
                consumer.qn,
                position=scan.position,
                gaps=scan.gaps,
                attempts=0,
                event_id=None,
                last_error=None,
            )
    for ctx in delivered:
        ctx.after_commit()
    return PassResult(
        consumer.qn,
        delivered=len(delivered),
        progressed=scan.changes_state and not failed,
        failed=failed,
    )
