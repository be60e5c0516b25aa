"""Claims and ends of attempts on Postgres: one statement each, on the driver's cursor,
committed without waiting for the WAL flush.

They run once per attempt on every worker, so their cost is the platform's cost per job: a
claim is one ``UPDATE ... RETURNING``, an end one statement that updates the job row and
inserts the run row together, both in autocommit (no BEGIN/COMMIT round trips), sent on the
driver's cursor of a small engine of their own. The statements are ``JobRows``'s own,
compiled once for Postgres (``CompiledStatement``): executing a SQLAlchemy statement costs
more CPU than the round trip, compiling it once costs nothing per job, and there is no second
copy of the SQL to keep in step. The one difference between the databases is the end's
shape: Postgres composes the row's update, the check for an end sent again and the run
row's insert into one statement (data-modifying CTEs, which SQLite lacks); ``JobRows``
sends the same three statements in one transaction. A claim that must count its keys'
running attempts (``sequential``, ``max_per_tenant``) and a wake of the rows waiting for
them take the keys' locks first: each goes as one transaction in one round trip (a pipeline,
``CompiledTransaction``), and the end of such an attempt goes with its wake in one
(``end_and_wake``). Each thread keeps the connection it checked out, with its cursor: a
checkout and a check-in per statement cost about as much CPU as the statement.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import threading
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import nullcontext
from typing import Any, NamedTuple, TypeVar

import psycopg
from psycopg.types.json import Jsonb
from sqlalchemy import (
    ClauseElement,
    Column,
    ColumnElement,
    Dialect,
    Engine,
    Insert,
    Select,
    Table,
    bindparam,
    create_engine,
    exists,
    func,
    insert,
    select,
)
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql.compiler import SQLCompiler

from asanoha.platform.jobs import clocks, control, job_events, publishing, workflows
from asanoha.platform.jobs.attempts import (
    AttemptEnd,
    Claim,
    ClaimLimit,
    JobRows,
    JobRowsUnavailable,
    Unclaimed,
    WaitingRow,
    new_claim_token,
    once_more_after_disconnect,
    woken_row,
)
from asanoha.platform.jobs.clocks import WAKE_LOST_AFTER
from asanoha.platform.jobs.enqueue import sealed_detached
from asanoha.platform.jobs.key_locks import key_locks
from asanoha.platform.jobs.message import OutboxMessage
from asanoha.platform.jobs.states import SUCCEEDED
from asanoha.platform.personal import vault
from asanoha.platform.store import Database, Tables

T = TypeVar("T")
#: Connections of the claim/end engine kept idle per process (a pool process runs one job
#: at a time; a thread-pool worker holds one per thread that runs jobs, without a limit).
POOL_SIZE = 4
#: The parameters of a wake that change with each call (``JobRows._woken_values``).
WOKEN_PARAMS = ("wake_relay_after", "wake_published_at")


class CompiledStatement:
    """A SQLAlchemy statement compiled once for Postgres, sent on a driver cursor.

    The constants of the statement (its states, event type prefixes, numbers) are written
    into the compiled text as SQL literals, so that a call sends only its own values: the
    driver adapts every parameter on every call, and the end's dozen constants cost as much
    as its values. A constant that has no literal form stays a parameter, merged under each
    call's values. The job-row columns need no bind processing on Postgres (psycopg takes
    ``uuid.UUID`` and aware datetimes as they are), so values go to the driver unchanged.
    """

    __slots__ = ("constants", "sql")

    def __init__(
        self, statement: ClauseElement, dialect: Dialect, names: Collection[str] | None = None
    ) -> None:
        compiled = statement.compile(dialect=dialect)
        assert isinstance(compiled, SQLCompiler)
        sql = str(compiled)
        # ``names``: the parameters each call gives (by default, those without a value).
        constants = {
            name: value
            for name, value in compiled.params.items()
            if (value is not None if names is None else name not in names)
        }
        self.constants: dict[str, Any] = {}
        literals: dict[str, str] = {}
        for name, value in constants.items():
            literal = _literal(compiled.binds[name].type, dialect, value)
            if literal is None:
                self.constants[name] = value
            else:
                literals[name] = literal
        # One pass over the text: a literal written in is never read again as a placeholder.
        self.sql = _PLACEHOLDER.sub(lambda found: literals.get(found[1], found[0]), sql)

    def execute(self, cursor: Any, values: Mapping[str, Any]) -> None:
        """Send the statement with ``values`` for its named parameters."""
        cursor.execute(self.sql, {**self.constants, **values} if self.constants else values)


class CompiledTransaction:
    """Statements compiled once for Postgres and sent as one transaction in one round trip.

    ``BEGIN``, the statements and ``COMMIT`` go in one pipeline (libpq's pipeline mode):
    sent together, each prepared as it would be alone, their results read once the server
    answered them all. A claim that must lock its keys before it counts them costs one round
    trip, as a claim that needs no lock does. Each statement sees what the ones before it
    did (read committed takes a snapshot per statement), so the locks the first takes cover
    what the next ones read. A statement that fails aborts the transaction: nothing after it
    runs, nothing before it commits (the connection, left in the failed transaction, is the
    caller's to throw away). ``names`` are the parameters each call gives; every other
    parameter is a constant of its statement.
    """

    __slots__ = ("_cursors", "parts")

    def __init__(self, parts: Sequence[CompiledStatement]) -> None:
        self.parts = list(parts)
        #: The statements' cursors on each connection, by the connection's id: made once
        #: per connection, not per call (a cursor costs about what a statement's values do).
        self._cursors: dict[int, tuple[Any, list[Any]]] = {}

    @classmethod
    def compile(
        cls, statements: Sequence[ClauseElement], dialect: Dialect, names: Collection[str]
    ) -> CompiledTransaction:
        """The transaction of ``statements``, each compiled with ``names`` as the
        parameters a call gives."""
        return cls([CompiledStatement(statement, dialect, names) for statement in statements])

    def execute(self, cursor: Any, values: Mapping[str, Any]) -> list[list[Any]]:
        """Send the transaction on ``cursor``'s connection; the rows of each statement, in
        order."""
        connection = cursor.connection
        sent = self._cursors_on(connection)
        # A libpq older than 14 has no pipelines: the statements then go one by one.
        with connection.pipeline() if _PIPELINES else nullcontext():
            cursor.execute("BEGIN")
            for part, one in zip(self.parts, sent, strict=True):
                part.execute(one, values)
            cursor.execute("COMMIT")
        # ``pgresult.nfields`` rather than ``description``, which builds its columns.
        return [one.fetchall() if _returns_rows(one) else [] for one in sent]

    def _cursors_on(self, connection: Any) -> list[Any]:
        known = self._cursors.get(id(connection))
        if known is not None and known[0] is connection:
            return known[1]
        # A closed connection's cursors go (its id may be taken by a new connection). Each
        # connection is used by one thread at a time; the dict is only ever replaced.
        cursors = [connection.cursor() for _ in self.parts]
        kept = {key: entry for key, entry in self._cursors.items() if not entry[0].closed}
        kept[id(connection)] = (connection, cursors)
        self._cursors = kept
        return cursors


class PostgresJobRows(JobRows):
    """``JobRows`` on Postgres: its claim and end compiled once, one round trip each."""

    def __init__(
        self, database: Database, tables: Tables, *, wake_lost_after: float = WAKE_LOST_AFTER
    ) -> None:
        super().__init__(database, tables, wake_lost_after=wake_lost_after)
        dialect = database.engine.dialect
        self._dialect = dialect
        self._claim_sql = CompiledStatement(self._claim, dialect)
        self._look_sql = CompiledStatement(self._look, dialect)
        self._end_sql = CompiledStatement(self._end_in_one(), dialect)
        self._item_end_sql = CompiledStatement(self._item_end_in_one(), dialect)
        outbox = tables.outbox
        # A limited claim: its keys' locks, then the claim (see ``JobRows._claim_limited``).
        self._limited_sql = {
            shape: CompiledTransaction.compile(
                [key_locks(outbox, _key_columns(outbox, shape)), claim], dialect, _CLAIM_NAMES
            )
            for shape, claim in self._limited_claims.items()
            if any(shape)
        }
        # The marks of one message a worker published (``publishing.publish_marks``).
        self._mark_sql = [
            CompiledStatement(mark, dialect) for mark in publishing.publish_marks(outbox)
        ]
        # A wake: the ended row's keys' locks, then the wake of each key.
        self._wake_sql = CompiledTransaction.compile(
            self._wake_statements(), dialect, {"row_id", *WOKEN_PARAMS}
        )
        # The end of an attempt of a key-limited job, then the wake (``end_and_wake``).
        self._end_wake_sql = CompiledTransaction([self._end_sql, *self._wake_sql.parts])
        self._url = database.url
        self._engine_: Engine | None = None
        self._ends_engine_: Engine | None = None
        self._local = threading.local()
        self._held_lock = threading.Lock()
        self._held: list[_Held] = []
        #: Connections a forked process inherited: kept referenced, never used or closed
        #: (their sockets are the parent's).
        self._inherited: list[_Held] = []

    def _wake_statements(self) -> list[ClauseElement]:
        """A wake's statements: the ended row's keys' locks, then the wake of each key."""
        outbox = self._tables.outbox
        return [
            key_locks(outbox, [outbox.c[column] for column in control.KEY_COLUMNS]),
            *(self._wakes[column] for column in control.KEY_COLUMNS),
        ]

    def _end_in_one(self) -> Select[Any]:
        """``JobRows``'s end as one statement: the row's update (``_end``), the check for
        this very end committed already (``_ended_by``: sent again after its reply was lost)
        and the run row's insert (``_record``), which is written whether or not the job row
        still held the attempt (a redelivery may have judged it crashed meanwhile: the
        attempt did run), but not for an end sent again. Every part of the statement sees
        the row as it was before it. Returns 1 when the end holds the attempt."""
        ended = self._end.returning(self._tables.outbox.c.state).cte("ended")
        again = self._ended_by.cte("again")
        recorded = self._recorded(~exists(select(again.c.id))).cte("recorded")
        # The end's event, from the row as the update left it (``job_events``).
        event = job_events.end_event(self._tables, self._dialect, ended).cte("end_event")
        counted = (
            select(func.count()).select_from(ended).scalar_subquery()
            + select(func.count()).select_from(again).scalar_subquery()
        )
        # ``recorded`` and ``event`` are named so that they run; a data-modifying CTE runs
        # unreferenced.
        return select(counted).add_cte(recorded).add_cte(event)

    def _item_end_in_one(self) -> Select[Any]:
        """The success of a workflow step's job row that is not its step's last item, as
        one statement that writes all of it or nothing: the item counted down on its step
        (``workflows.count_down``, ``unless_last``) while the row still holds the attempt
        (taken with its item first, so nothing changes them before the writes below), then
        the item's end (``workflows.item_end``), the row's (``_end``), its run row and its
        event. Returns 1 when it wrote them; 0 when it wrote nothing (the step's last item,
        a step that no longer runs, an end that no longer holds the attempt or was written
        already): ``JobRows.end`` writes that end, under its run's row lock."""
        tables, outbox = self._tables, self._tables.outbox
        holds = self._end.whereclause
        assert holds is not None
        held = select(outbox.c.id).where(holds).with_for_update().cte("held")
        item = workflows.pending_item(tables, after=held).cte("item")
        counted = workflows.count_down(tables, item.c.run_id, item.c.step, unless_last=True).cte(
            "counted"
        )
        item_ended = workflows.item_end(tables, after=counted).cte("item_ended")
        ended = (
            self._end.where(exists(select(1).select_from(counted)))
            .returning(outbox.c.state)
            .cte("ended")
        )
        recorded = self._recorded(exists(select(1).select_from(ended))).cte("recorded")
        event = job_events.end_event(tables, self._dialect, ended).cte("end_event")
        wrote = select(func.count()).select_from(ended).scalar_subquery()
        # The writes are named so that they run; a data-modifying CTE runs unreferenced.
        return select(wrote).add_cte(item_ended).add_cte(recorded).add_cte(event)

    def _recorded(self, condition: ColumnElement[bool]) -> Insert:
        """The insert of the attempt's run row (``_run_values`` as ``run_*`` parameters),
        when ``condition`` holds."""
        runs = self._tables.job_runs
        values = select(
            *(bindparam(f"run_{name}", type_=runs.c[name].type) for name in _RUN_COLUMNS)
        ).where(condition)
        return insert(runs).from_select(_RUN_COLUMNS, values)

    @property
    def _ends_engine(self) -> Engine:
        """An end that takes more than one statement (a workflow step's, which writes its
        run's state; a kept result) runs its transaction on the claim/end engine too: it
        commits without waiting for the WAL flush like the one-statement end, so a step's
        end holds its run's row for the statements, not for a flush. A Postgres crash can
        lose such an end whole (its job row, run row, item and next steps together): the
        row is then ended as crashed and the step runs again, as any job."""
        if self._ends_engine_ is None:
            engine = self._own_engine().execution_options(isolation_level="READ COMMITTED")
            # A step's result and a kept result are sealed as the application's own
            # connections seal them.
            vault.attach_like(engine, self._database.engine)
            self._ends_engine_ = engine
        return self._ends_engine_

    def _own_engine(self) -> Engine:
        if self._engine_ is None:
            self._engine_ = create_engine(
                self._url,
                isolation_level="AUTOCOMMIT",
                pool_size=POOL_SIZE,
                max_overflow=-1,
                pool_reset_on_return=None,
                # A claim or an end does not wait for its WAL flush (the wait is most of its
                # cost): a Postgres crash can lose the last fraction of a second of them,
                # never a job's own writes, which commit through the service as usual (and
                # flush every claim written before them). A lost end leaves the row running;
                # the relay ends it as crashed (recover_lost_attempts).
                connect_args={"options": "-c synchronous_commit=off"},
            )
        return self._engine_

    def claim(
        self,
        row_id: uuid.UUID,
        attempt: int,
        token: str | None = None,
        *,
        lane: str = "worker",
        limit: ClaimLimit | None = None,
    ) -> Claim | Unclaimed:
        """See ``JobRows.claim``."""
        started = clocks.now()
        token = token or new_claim_token()
        params = self._claim_params(row_id, attempt, token, started, lane)
        if limit is not None:
            return self._claim_limited_in_one(row_id, attempt, token, lane, limit, params)

        def run(cursor: Any) -> Claim | _Look | None:
            self._claim_sql.execute(cursor, params)
            row = cursor.fetchone()
            if row is not None:
                return Claim(row[0], dict(row[1]), row[2], row[3], started, token, priority=row[4])
            self._look_sql.execute(cursor, {"row_id": row_id})
            found = cursor.fetchone()
            return None if found is None else _Look(*found)

        claimed = self._with_cursor(run)
        if isinstance(claimed, Claim):
            return claimed
        # Not claimed (a copy of a message, mostly): judged on the row as it was found. The
        # rare write that judgement may take goes through the application's engine.
        return once_more_after_disconnect(
            lambda: self._judge_unclaimed(self._execute, row_id, claimed, attempt, started)
        )

    def _claim_limited_in_one(
        self,
        row_id: uuid.UUID,
        attempt: int,
        token: str,
        lane: str,
        limit: ClaimLimit,
        params: dict[str, Any],
    ) -> Claim | Unclaimed:
        """A limited claim as one transaction in one round trip; one that finds no room
        (or no row) is judged, and left waiting, by ``JobRows``'s claim, under the locks
        again (the key may have been freed meanwhile: that claim takes it)."""
        transaction = self._limited_sql[limit.shape]
        params = {**params, "limit_max": limit.max_per_tenant}

        def run(cursor: Any) -> Claim | None:
            _, claimed = transaction.execute(cursor, params)
            if not claimed:
                return None
            row = claimed[0]
            return Claim(
                row[0], dict(row[1]), row[2], row[3], params["claim_started"], token,
                priority=row[4],
            )  # fmt: skip

        claim = self._with_cursor(run)
        if claim is not None:
            return claim
        return super().claim(row_id, attempt, token, lane=lane, limit=limit)

    def wake(self, row_id: uuid.UUID) -> list[WaitingRow]:
        """See ``JobRows.wake``: one transaction in one round trip."""
        values = {"row_id": row_id, **self._woken_values()}

        def run(cursor: Any) -> list[WaitingRow]:
            _, *woken = self._wake_sql.execute(cursor, values)
            return [woken_row(row) for rows in woken for row in rows]

        return self._with_cursor(run)

    def end_and_wake(
        self,
        row_id: uuid.UUID,
        job_qn: str,
        tenant_id: str | None,
        attempt: int,
        claim: Claim,
        end: AttemptEnd,
    ) -> tuple[bool, list[WaitingRow]]:
        """See ``JobRows.end_and_wake``: the one-statement end and the wake as one
        transaction in one round trip (``CompiledTransaction``). The wake takes the keys' locks after the end's update: a claim that counted the row
        as running before holds them until its own row waits, and the wake, reading after
        it, finds that row."""
        if self.ends_step(claim, end) or end.keep_result:
            return super().end_and_wake(row_id, job_qn, tenant_id, attempt, claim, end)
        finished = clocks.now()
        params = self._end_in_one_params(row_id, job_qn, tenant_id, attempt, claim, end, finished)
        params.update(self._woken_values())

        def run(cursor: Any) -> tuple[bool, list[WaitingRow]]:
            counted, _, *woken = self._end_wake_sql.execute(cursor, params)
            return bool(counted and counted[0][0]), [
                woken_row(row) for rows in woken for row in rows
            ]

        return self._with_cursor(run)

    def mark_published(self, sent: list[OutboxMessage], failed: list[OutboxMessage]) -> None:
        """See ``JobRows.mark_published``: one message, one statement on the cursor."""
        if len(sent) + len(failed) != 1:
            super().mark_published(sent, failed)
            return
        mark = self._mark_sql[0] if sent else self._mark_sql[1]
        values = publishing.mark_values((sent or failed)[0], clocks.now())
        self._with_cursor(lambda cursor: mark.execute(cursor, values))

    def _execute(self, statement: Any, params: Mapping[str, Any]) -> Any:
        with self._database.begin() as conn:
            return conn.execute(statement, params)

    def end(
        self,
        row_id: uuid.UUID,
        job_qn: str,
        tenant_id: str | None,
        attempt: int,
        claim: Claim,
        end: AttemptEnd,
    ) -> bool:
        """See ``JobRows.end``."""
        if self.ends_step(claim, end):
            assert self.workflow_of is not None
            if (
                end.state == SUCCEEDED
                and not end.keep_result
                and workflows.one_of_many(self.workflow_of, job_qn, claim.headers)
            ):
                finished = clocks.now()
                params = self._end_in_one_params(
                    row_id, job_qn, tenant_id, attempt, claim, end, finished
                )
                if self._end_item_in_one(row_id, params, end.result):
                    return True
            # A step's end that may end its step starts what follows it in the same
            # transaction, under its run's row lock: the general path.
            return super().end(row_id, job_qn, tenant_id, attempt, claim, end)
        if end.keep_result:
            # A kept result is written beside the end: the general path.
            return super().end(row_id, job_qn, tenant_id, attempt, claim, end)
        finished = clocks.now()
        params = self._end_in_one_params(row_id, job_qn, tenant_id, attempt, claim, end, finished)

        def run(cursor: Any) -> bool:
            self._end_sql.execute(cursor, params)
            row = cursor.fetchone()
            return bool(row and row[0])

        return self._with_cursor(run)

    def _end_in_one_params(
        self,
        row_id: uuid.UUID,
        job_qn: str,
        tenant_id: str | None,
        attempt: int,
        claim: Claim,
        end: AttemptEnd,
        finished: dt.datetime,
    ) -> dict[str, Any]:
        """The values of ``_end_in_one``: the end's, its run row's and its event's."""
        params = self._end_params(row_id, attempt, claim, end, finished)
        for name, value in self._run_values(
            row_id, job_qn, tenant_id, attempt, claim, end, finished
        ).items():
            params[f"run_{name}"] = value
        event = self._event_values(row_id, job_qn, tenant_id, attempt, claim, end, finished)
        # The driver takes a JSON document wrapped (SQLAlchemy's bind processing is skipped).
        for name in ("event_payload", "event_metadata"):
            event[name] = Jsonb(event[name])
        params.update(event)
        return params

    def _end_item_in_one(self, row_id: uuid.UUID, params: dict[str, Any], result: Any) -> bool:
        """End a step's job row that succeeded, with its item, in one round trip, when it
        is not its step's last item: then nothing follows it, and its end needs neither the
        run's row nor anything read first. Returns ``False``, having written nothing, for
        any other end (``_item_end_in_one``), which ``JobRows.end`` then writes.

        Committed on its own (no transaction left open), a statement that wrote nothing
        leaves no row lock behind (a count that waited for another end's keeps the step's
        row locked to its end): the general end takes the run's row first, as every
        transition of a run does, and no end or cancel waits for it in a circle."""
        values = {
            **params,
            "item_job_id": row_id,
            "item_state": SUCCEEDED,
            # Sealed as the general end's transaction would: with the values the attempt
            # carries (it opened none of its own).
            "item_result": Jsonb(sealed_detached(self._database.engine, result)),
            "item_error": None,
        }

        def run(cursor: Any) -> bool:
            self._item_end_sql.execute(cursor, values)
            row = cursor.fetchone()
            return bool(row and row[0])

        return self._with_cursor(run)

    def forget_inherited_connections(self, **_: Any) -> None:
        """After a fork: drop the parent's connections without closing them."""
        with self._held_lock:
            self._inherited.extend(self._held)
            self._held = []
        self._local = threading.local()
        if self._engine_ is not None:
            self._engine_.dispose(close=False)
        self._ends_engine_ = None

    def close(self) -> None:
        """Close the engine's connections, the ones threads hold included."""
        with self._held_lock:
            held, self._held = self._held, []
        for one in held:
            if one.pid == os.getpid():
                one.connection.invalidate()
        self._local = threading.local()
        if self._engine_ is not None:
            self._engine_.dispose()
            self._engine_ = None
        self._ends_engine_ = None

    def _with_cursor(self, run: Callable[[Any], T]) -> T:
        # A connection that died (database restarted) fails once; it is thrown away and the
        # call runs again on a new one. ``run`` must be idempotent: the first try may have
        # committed before the connection died (claims and ends are, by their token). A
        # database that refuses a new connection fails at once.
        for again in (True, False):
            held = self._held_connection()
            try:
                return run(held.cursor)
            except (psycopg.OperationalError, psycopg.InterfaceError) as error:
                self._drop_held(held, error)
                if not again:
                    raise JobRowsUnavailable(str(error)) from error
                # The other idle connections died with it (a restart): the second try must
                # not take one of them, or a claim that committed on the first would be
                # given back and judged a crashed attempt on its redelivery.
                self._own_engine().dispose()
            except psycopg.Error as error:
                # Any other refusal (a read-only standby, a lock timeout): the caller gives
                # the message back rather than acknowledge it with the row unended.
                self._drop_held(held, error)
                raise JobRowsUnavailable(str(error)) from error
        raise AssertionError("unreachable")

    def _held_connection(self) -> _Held:
        held: _Held | None = getattr(self._local, "held", None)
        if held is not None and held.pid == os.getpid():
            return held
        if held is not None:
            self.forget_inherited_connections()  # forked without the worker's signal
        try:
            connection = self._own_engine().raw_connection()
        except (DBAPIError, psycopg.Error) as error:
            # The pool hands over the driver's error unwrapped when it cannot connect.
            raise JobRowsUnavailable(str(error)) from error
        held = _Held(connection, connection.cursor(), os.getpid())
        self._local.held = held
        with self._held_lock:
            self._held.append(held)
        return held

    def _drop_held(self, held: _Held, error: BaseException) -> None:
        self._local.held = None
        with self._held_lock:
            if held in self._held:
                self._held.remove(held)
        held.connection.invalidate(error)


class _Look(NamedTuple):
    """A job row as a claim that did not take it found it (``_look_sql``)."""

    state: str
    attempt: int
    job_qn: str
    headers: Any
    started_at: dt.datetime | None
    claim_token: str | None
    not_before: dt.datetime
    published_at: dt.datetime | None


class _Held:
    """A thread's checked-out connection and its cursor."""

    __slots__ = ("connection", "cursor", "pid")

    def __init__(self, connection: Any, cursor: Any, pid: int) -> None:
        self.connection = connection
        self.cursor = cursor
        self.pid = pid


#: A named placeholder of the driver's parameter formatting, or an escaped ``%``.
_PLACEHOLDER = re.compile(r"%%|%\((\w+)\)s")
#: The result states of a statement that returned rows (``_returns_rows``).
_TUPLES = frozenset(
    {psycopg.pq.ExecStatus.TUPLES_OK, psycopg.pq.ExecStatus.SINGLE_TUPLE,
     psycopg.pq.ExecStatus.TUPLES_CHUNK}
)  # fmt: skip
#: Whether the driver's libpq sends pipelines (14 and later).
_PIPELINES = psycopg.Pipeline.is_supported()
#: The columns of an attempt's run row (``JobRows._run_values``).
_RUN_COLUMNS = ["job_qn", "task_id", "tenant_id", "attempt", "status", "error", "started_at",
                "finished_at", "logs"]  # fmt: skip
#: The parameters a limited claim's call gives (the rest are its statements' constants).
_CLAIM_NAMES = frozenset(
    {"row_id", "claim_attempt", "claim_started", "claim_due_by", "claim_token", "claim_lane",
     "limit_max"}
)  # fmt: skip


def _returns_rows(cursor: Any) -> bool:
    """Whether ``cursor``'s statement returned rows: ``description is not None``, as
    psycopg decides it, without building the columns."""
    result = cursor.pgresult
    return result is not None and (result.nfields > 0 or result.status in _TUPLES)


def _literal(type_: Any, dialect: Dialect, value: Any) -> str | None:
    """``value`` as a SQL literal of ``type_`` in a statement's text for the driver (the
    dialect's own rendering, which doubles ``%`` for the driver's parameter formatting);
    ``None`` for a value that stays a parameter (only strings and integers are written
    out)."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return None
    if isinstance(value, str) and "\x00" in value:
        return None
    render = type_.literal_processor(dialect)
    if render is None:
        return None
    return str(render(value))


def _key_columns(outbox: Table, shape: tuple[bool, bool]) -> list[Column[Any]]:
    """The key columns a limited claim of ``shape`` locks (``ClaimLimit.shape``)."""
    key, slot = shape
    return [column for column, held in ((outbox.c.concurrency_key, key),
                                        (outbox.c.slot_key, slot)) if held]  # fmt: skip
