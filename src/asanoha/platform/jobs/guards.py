"""The guard vocabulary of the job row: the conditions transitions compose.

Each is a SQL condition on the job-row table (``outbox``); the statements in this package
are built from these words only, so that "due" or "held by this claim" means one thing
wherever a row changes state.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import ColumnElement, FromClause, Table, and_, exists, func, or_, select, tuple_

from asanoha.platform.jobs.states import PENDING, RUNNING, WAITING_TOKEN

#: A pause of a whole lane is stored as ``lane:<name>``.
LANE_PREFIX = "lane:"

Param = Any  # a value or a ``bindparam``


def lane_target(lane: str) -> str:
    """The pause target of a whole lane."""
    return LANE_PREFIX + lane


def due(outbox: Table, by: Param) -> ColumnElement[bool]:
    """Its attempt may start: ``not_before`` at or before ``by`` (see ``clocks.due_by``).
    A snoozed attempt is pending at the same attempt, so the attempt number alone would let
    an early copy of its message run it."""
    condition: ColumnElement[bool] = outbox.c.not_before <= by
    return condition


def not_due(outbox: Table, by: Param) -> ColumnElement[bool]:
    """Its attempt may not start yet at ``by``."""
    condition: ColumnElement[bool] = outbox.c.not_before > by
    return condition


def pending_before(outbox: Table, attempt: Param) -> ColumnElement[bool]:
    """Pending, waiting for an attempt earlier than or equal to ``attempt`` (a claim of
    ``attempt`` may take it)."""
    return and_(outbox.c.state == PENDING, outbox.c.attempt < attempt)


def pending_at(outbox: Table, row_attempt: Param) -> ColumnElement[bool]:
    """Pending, its last spent attempt ``row_attempt`` (the next is ``row_attempt + 1``)."""
    return and_(outbox.c.state == PENDING, outbox.c.attempt == row_attempt)


def held_by(outbox: Table, token: Param) -> ColumnElement[bool]:
    """The row carries the claim token ``token`` ("" for none)."""
    condition: ColumnElement[bool] = func.coalesce(outbox.c.claim_token, "") == token
    return condition


def running_under(outbox: Table, attempt: Param, token: Param) -> ColumnElement[bool]:
    """Running ``attempt``, held by the claim ``token`` ("" for a claim that wrote none):
    only the claim an end ends. After an operator's retry the attempt numbers start again,
    and a late end of the earlier run must not end the new attempt of the same number."""
    return and_(outbox.c.state == RUNNING, outbox.c.attempt == attempt, held_by(outbox, token))


def claimed_by(outbox: Table, attempt: Param, token: Param) -> ColumnElement[bool]:
    """Already claimed by this very claim (sent again after its reply was lost)."""
    return and_(
        outbox.c.state == RUNNING, outbox.c.attempt == attempt, outbox.c.claim_token == token
    )


def unpublished(outbox: FromClause) -> ColumnElement[bool]:
    """No message of its current attempt went to the broker."""
    return outbox.c.published_at.is_(None)


def relayable(outbox: Table, now: Param) -> ColumnElement[bool]:
    """The relay may publish it: pending, unpublished, its relay clock reached (a fresh row
    is left to its writer, which publishes it right after commit)."""
    return and_(outbox.c.state == PENDING, unpublished(outbox), outbox.c.relay_after <= now)


def waiting(outbox: FromClause) -> ColumnElement[bool]:
    """Left waiting for a busy key or a pause by a claim: pending, unpublished, carrying
    ``WAITING_TOKEN`` until the end that frees its key wakes it."""
    return and_(
        outbox.c.state == PENDING, outbox.c.claim_token == WAITING_TOKEN, unpublished(outbox)
    )


def not_waiting(outbox: Table) -> ColumnElement[bool]:
    """Not left waiting for a busy key or a pause (``waiting``); a row without a claim
    token is not waiting (the comparison alone would be NULL for it)."""
    return or_(outbox.c.claim_token.is_(None), outbox.c.claim_token != WAITING_TOKEN)


def not_paused(outbox: Table, pauses: Table, lane_target: Param) -> ColumnElement[bool]:
    """Neither its job nor its lane (``lane_target``) is paused."""
    return ~exists().where(pauses.c.target.in_([outbox.c.job_qn, lane_target]))


def key_free(outbox: Table, key: Param) -> ColumnElement[bool]:
    """No attempt of the concurrency key ``key`` is running (``sequential``)."""
    other = outbox.alias("other")
    return ~exists().where(other.c.concurrency_key == key, other.c.state == RUNNING)


def first_due_of_key(
    outbox: Table, key: Param, by: Param, created: Param, row_id: Param
) -> ColumnElement[bool]:
    """No row of ``key`` older than (``created``, ``row_id``) is due by ``by``: a key's rows
    run in enqueue order."""
    other = outbox.alias("other")
    return ~exists().where(
        other.c.concurrency_key == key,
        other.c.state == PENDING,
        other.c.not_before <= by,
        tuple_(other.c.created_at, other.c.id) < tuple_(created, row_id),
    )


def slot_free(outbox: Table, slot: Param, limit: Param) -> ColumnElement[bool]:
    """Fewer than ``limit`` attempts of the slot key ``slot`` run (``max_per_tenant``)."""
    other = outbox.alias("other")
    running = (
        select(func.count())
        .select_from(other)
        .where(other.c.slot_key == slot, other.c.state == RUNNING)
        .scalar_subquery()
    )
    condition: ColumnElement[bool] = running < limit
    return condition


def live_of_key(outbox: Table, key: str, states: tuple[str, ...]) -> ColumnElement[bool]:
    """A row of the concurrency key ``key`` in one of ``states``."""
    return and_(outbox.c.concurrency_key == key, outbox.c.state.in_(states))


def created_since(outbox: Table, since: dt.datetime) -> ColumnElement[bool]:
    """Created at or after ``since`` (``unique_for``)."""
    condition: ColumnElement[bool] = outbox.c.created_at >= since
    return condition
