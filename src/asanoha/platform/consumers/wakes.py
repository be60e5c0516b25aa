"""The pending wake-up of each consumer partition: a row in ``asanoha_consumer_wakes`` while
its wake-up task is pending or running, so that writes arm at most one task per partition.

Why the database and not a Redis key: the broker may be RabbitMQ or the in-memory one, and
the event store is the one service every process that writes or delivers events has. Why a
table of its own and not a column of the cursor row: a pass holds its cursor row locked
(``FOR UPDATE``) for the whole pass, so a writer arming the wake-up would wait for the pass,
and a pass would find a cursor held by a writer arming it and skip it as busy.

The protocol (the writer arms after its commit; the task runs rounds):

- A writer whose transaction appended followed events, after the commit: sets ``again`` on
  the rows that exist, then inserts the rows that do not, and publishes a task for each row
  it inserted (``arm_wakes``).
- The task, at the start of each round, clears ``again`` in a committed transaction of its
  own, then runs the partition's passes; at the end of the round it deletes its row unless
  ``again`` was set meanwhile, in which case it clears it and runs another round
  (``end_round``).

No event is left without a wake-up: a writer's event E commits before its writer arms. If
the writer finds no row, it inserts one and publishes a task, which scans after E. If it
finds one, the row's task still has a round to begin (it clears ``again`` and scans after
E), or is in a round and will find ``again`` set at its end (the writer set it, or another
writer did after the round's clear), so it scans again after E. The end of a round and a
writer's update of the same row are serialised by the row lock: either the row is gone
before the writer looks (it inserts a new one) or the round sees ``again``.

A task whose message was lost (expired in the queue, a broker that lost it) would hold its
row for good: ``until`` bounds that, after it the next writer deletes the row and arms a
new task.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy import (
    ColumnElement,
    Connection,
    Table,
    and_,
    delete,
    literal,
    or_,
    select,
    tuple_,
    update,
)

from asanoha.platform.store import Database, Tables


@dataclass(frozen=True)
class Wake:
    """The wake-up of one consumer partition, owned by the task that carries ``token``."""

    name: str
    partition: int
    token: str


#: Partition keys beyond which a write wakes every partition of a consumer (a batch over
#: many streams): one condition per key would cost more than the tasks it saves.
MAX_KEYS_PER_WAKE = 32


def arm_wakes(
    database: Database,
    tables: Tables,
    names: Sequence[str],
    *,
    until: dt.datetime,
    now: dt.datetime,
    partition: int | None = None,
    keys: Mapping[str, Collection[int]] | None = None,
) -> list[Wake]:
    """Ask for a wake-up of every partition of ``names`` (or of ``partition`` only; or, for
    a name in ``keys``, of the partitions that own those partition keys: a write wakes the
    partitions its events go to); return those that had none pending, whose rows this call
    inserted: the caller publishes their tasks. Each step is a transaction of its own, so
    no row lock is held from one to the next (two writers locking rows in different orders
    could deadlock)."""
    wakes = tables.consumer_wakes
    cursors = tables.consumers
    theirs: ColumnElement[bool] = cursors.c.name.in_(names)
    if partition is not None:
        theirs = and_(theirs, cursors.c.partition == partition)
    if keys:
        theirs = and_(theirs, _owning(cursors, keys))
    with database.connect() as conn:
        targets = [
            (name, part)
            for name, part in conn.execute(
                select(cursors.c.name, cursors.c.partition).where(theirs)
            )
        ]
    if not targets:
        return []
    mine = tuple_(wakes.c.name, wakes.c.partition).in_(targets)
    theirs = tuple_(cursors.c.name, cursors.c.partition).in_(targets)
    with database.begin() as conn:
        # A task that never ran (its message expired or was lost) no longer holds its row.
        conn.execute(delete(wakes).where(mine, wakes.c.until < now))
    with database.begin() as conn:
        # A pending or running task runs one more round; rows already set are not touched.
        conn.execute(update(wakes).where(mine, wakes.c.again.is_(False)).values(again=True))
    with database.connect() as conn:
        missing = conn.execute(
            select(cursors.c.name, cursors.c.partition)
            .select_from(
                cursors.outerjoin(
                    wakes,
                    and_(wakes.c.name == cursors.c.name, wakes.c.partition == cursors.c.partition),
                )
            )
            .where(theirs, wakes.c.name.is_(None))
            .order_by(cursors.c.name, cursors.c.partition)
        ).all()
    armed: list[Wake] = []
    for name, part in missing:
        token = uuid.uuid4().hex
        row = {"name": name, "partition": part, "token": token, "again": False, "until": until}
        with database.begin() as conn:
            # A writer beside this one may insert it first: its task covers this write too.
            inserted = database.backend.insert_unless_exists(conn, wakes, row)
        if inserted is not None:
            armed.append(Wake(name, part, token))
    return armed


def _owning(cursors: Table, keys: Mapping[str, Collection[int]]) -> ColumnElement[bool]:
    """The cursor rows that deliver an event with one of ``keys[name]`` (a name not in
    ``keys``, or with too many keys: every partition of it). The count of partitions is the
    row's own: during a change of a consumer's partitions, each row says how it splits."""
    every = [name for name, held in keys.items() if len(held) > MAX_KEYS_PER_WAKE]
    owned = [
        and_(
            cursors.c.name == name,
            or_(
                cursors.c.partitions == 1,
                literal(key) % cursors.c.partitions == cursors.c.partition,
            ),
        )
        for name, held in sorted(keys.items())
        if len(held) <= MAX_KEYS_PER_WAKE
        for key in sorted(held)
    ]
    return or_(cursors.c.name.not_in(list(keys)), cursors.c.name.in_(every), *owned)


def begin_round(conn: Connection, tables: Tables, wake: Wake, until: dt.datetime) -> bool:
    """Clear ``again`` before the task's first round scans (committed by the caller before
    the pass begins); ``False`` when the row is no longer the task's (it expired and another
    task took the partition over)."""
    wakes = tables.consumer_wakes
    found = conn.execute(
        update(wakes)
        .where(_owned(tables, wake))
        .values(again=False, until=until)
        .returning(wakes.c.token)
    ).first()
    return found is not None


def end_round(conn: Connection, tables: Tables, wake: Wake, until: dt.datetime) -> bool:
    """End the task's round: delete its row, unless a write set ``again`` meanwhile; then
    clear ``again`` (the next round's beginning) and return ``True``."""
    wakes = tables.consumer_wakes
    ended = conn.execute(
        delete(wakes).where(_owned(tables, wake), wakes.c.again.is_(False))
    ).rowcount
    if ended:
        return False
    return begin_round(conn, tables, wake, until)


def hold_wake(conn: Connection, tables: Tables, wake: Wake, until: dt.datetime) -> bool:
    """Keep the task's row until ``until`` (a follow-up task of the same token runs by then,
    or, without one, writes arm no task before then); ``False``, and the row deleted, when
    it is no longer the task's or the partition is gone (a repartition removed it)."""
    wakes = tables.consumer_wakes
    cursors = tables.consumers
    partition_exists = (
        select(cursors.c.name)
        .where(cursors.c.name == wake.name, cursors.c.partition == wake.partition)
        .exists()
    )
    found = conn.execute(
        update(wakes)
        .where(_owned(tables, wake), partition_exists)
        .values(until=until)
        .returning(wakes.c.token)
    ).first()
    if found is None:
        drop_wake(conn, tables, wake)
    return found is not None


def drop_wake(conn: Connection, tables: Tables, wake: Wake) -> None:
    """Delete the task's row (its message could not be published): the next write arms a
    new one."""
    conn.execute(delete(tables.consumer_wakes).where(_owned(tables, wake)))


def _owned(tables: Tables, wake: Wake) -> ColumnElement[bool]:
    wakes = tables.consumer_wakes
    return and_(
        wakes.c.name == wake.name,
        wakes.c.partition == wake.partition,
        wakes.c.token == wake.token,
    )
