"""The three clocks of a job row, and the one rule that relates them.

- ``not_before``: the attempt may not start earlier (a delay, a backoff, a snooze, a
  debounce window). A claim checks it (``guards.due``), within ``DUE_MARGIN``.
- ``relay_after``: the relay may not publish the row earlier. Always ``>= not_before``
  (``relay_time``): a wait longer than the broker may hold stays in the database, and a
  debounce window stays open while nobody published the row.
- ``published_at``: when the broker took the row's current message (``None``: not sent
  for this attempt). Cleared whenever a new attempt (or the same one, snoozed) waits.

Every writer of these columns is in this package and computes them with these functions.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import ColumnElement, Table, case, literal

#: Seconds a fresh row is left to its writer (which publishes it right after commit) before
#: the relay may take it: a younger row is most likely being published right now.
RELAY_GRACE = 5.0
#: Seconds before its ``not_before`` a row already counts as due for a claim.
#: ``not_before`` is written with the enqueuing process's clock and compared with the
#: claiming worker's: a fresh row's message, published at once, can reach a worker whose
#: clock runs a little behind the enqueuer's before its ``not_before`` on the worker's
#: clock. Only a copy of a message (a redelivery, a duplicate publish, a look again) comes
#: any earlier.
DUE_MARGIN = 1.0
#: Seconds a row waiting for a busy key rests before the relay publishes it again, should
#: the wake of the end that frees its key be lost (its worker died between the end and the
#: wake): the end wakes it, so this is a recovery, not a poll. Workers pass the visibility
#: timeout (``JobRows(wake_lost_after=...)``); this is the default.
WAKE_LOST_AFTER = 3600.0


def now() -> dt.datetime:
    """The time every transition defaults to (UTC)."""
    return dt.datetime.now(dt.UTC)


def relay_time(not_before: dt.datetime, *, by_broker: bool) -> dt.datetime:
    """When the relay may publish a pending attempt that may start at ``not_before``.

    The rule of the relay clock, which every writer of ``relay_after`` follows:
    ``relay_after >= not_before``. ``by_broker``: the writer publishes the attempt itself,
    with its countdown, right after commit; the relay leaves it ``RELAY_GRACE`` more
    seconds to do so.
    """
    return not_before + dt.timedelta(seconds=RELAY_GRACE) if by_broker else not_before


def relay_time_now(
    outbox: Table, at: dt.datetime | ColumnElement[dt.datetime]
) -> ColumnElement[dt.datetime]:
    """``relay_time`` of a pending row made due for the relay at ``at`` (a time, or a
    parameter; no writer publishes the row), as a SQL expression: ``at``, or its
    ``not_before`` while that is later."""
    at_now = at if isinstance(at, ColumnElement) else literal(at, outbox.c.not_before.type)
    return case((outbox.c.not_before > at_now, outbox.c.not_before), else_=at_now)


def due_by(started: dt.datetime) -> dt.datetime:
    """The latest ``not_before`` a claim made at ``started`` takes as due."""
    return started + dt.timedelta(seconds=DUE_MARGIN)


def as_utc(moment: dt.datetime) -> dt.datetime:
    """``moment`` with its time zone (SQLite returns naive UTC times)."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=dt.UTC)
