"""Claims and ends of attempts on Postgres: one statement each, on the driver's cursor,
committed without waiting for the WAL flush.

They run once per attempt on every worker, so their cost is the platform's cost per job: a
claim is one ``UPDATE ... RETURNING``, an end one statement that updates the job row and
inserts the run row together (data-modifying CTEs), both in autocommit (no BEGIN/COMMIT
round trips), sent on the driver's cursor of a small engine of their own (no SQLAlchemy
statement execution on this path, which costs more CPU than the round trip). Each thread
keeps the connection it checked out, with its cursor: a checkout and a check-in per
statement cost about as much CPU as the statement.
"""

from __future__ import annotations

import datetime as dt
import os
import threading
import uuid
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, TypeVar

import psycopg
from sqlalchemy import Engine, create_engine
from sqlalchemy.exc import DBAPIError

from asanoha.platform.service.job_pauses import lane_target
from asanoha.platform.service.outbox import CANCELLED, PENDING, RUNNING
from asanoha.platform.store import Database, Tables
from asanoha.workers.job_rows import (
    AttemptEnd,
    Claim,
    ClaimLimit,
    JobRows,
    JobRowsUnavailable,
    Unclaimed,
    due_by,
    new_claim_token,
    once_more_after_disconnect,
)

T = TypeVar("T")
#: Connections of the claim/end engine kept idle per process (a pool process runs one job
#: at a time; a thread-pool worker holds one per thread that runs jobs, without a limit).
POOL_SIZE = 4


class PostgresJobRows(JobRows):
    """``JobRows`` on Postgres, one statement per claim and per end."""

    def __init__(self, database: Database, tables: Tables) -> None:
        super().__init__(database, tables)
        outbox, runs = tables.outbox.name, tables.job_runs.name
        pauses = tables.job_pauses.name
        # Pending at an earlier attempt and due, or already claimed by this very claim:
        # sent again after the connection died, it finds its own committed claim by the
        # token. (Due: see ``JobRows._claim_statement``.)
        self._claim_sql = (
            f"UPDATE {outbox} SET state = '{RUNNING}', attempt = %(attempt)s, "
            "started_at = %(started)s, claim_token = %(token)s "
            f"WHERE id = %(id)s AND (state = '{PENDING}' AND attempt < %(attempt)s "
            "AND not_before <= %(due_by)s "
            f"AND NOT EXISTS (SELECT 1 FROM {pauses} WHERE target IN (job_qn, %(lane)s)) "
            f"OR state = '{RUNNING}' AND attempt = %(attempt)s AND claim_token = %(token)s) "
            "RETURNING job_qn, payload, headers, trigger_result, priority"
        )
        self._look_sql = (
            "SELECT state, attempt, job_qn, headers, started_at, claim_token, not_before, "
            f"published_at FROM {outbox} WHERE id = %(id)s"
        )
        # The run row is inserted whether or not the job row still held the attempt (a
        # redelivery may have judged it crashed meanwhile): the attempt did run. Not when
        # this very end committed already (``again``: sent a second time after its reply
        # was lost; every part of the statement sees the row as it was before it). The
        # update holds only the claim it ends (``held``): see ``JobRows``.
        self._end_sql = (
            f"WITH ended AS (UPDATE {outbox} SET state = CASE WHEN cancel_requested AND "
            f"%(state)s::varchar = '{PENDING}' THEN '{CANCELLED}' ELSE %(state)s::varchar END, "
            "attempt = %(row_attempt)s, last_error = %(error)s, "
            "finished_at = CASE WHEN cancel_requested AND "
            f"%(state)s::varchar = '{PENDING}' THEN %(finished)s ELSE %(row_finished)s END, "
            "not_before = %(not_before)s, relay_after = %(relay_after)s, "
            f"published_at = CASE WHEN %(state)s::varchar = '{PENDING}' THEN NULL "
            "ELSE published_at END, claim_token = %(token)s "
            f"WHERE id = %(id)s AND state = '{RUNNING}' AND attempt = %(attempt)s "
            "AND coalesce(claim_token, '') = %(held)s RETURNING 1), "
            f"again AS (SELECT 1 FROM {outbox} WHERE id = %(id)s AND state <> '{RUNNING}' "
            "AND attempt = %(row_attempt)s AND claim_token = %(token)s), "
            f"recorded AS (INSERT INTO {runs} (job_qn, task_id, tenant_id, attempt, status, "
            "error, started_at, finished_at, logs) SELECT %(job_qn)s, %(task_id)s, "
            "%(tenant_id)s, %(attempt)s, %(status)s, %(error)s, %(started)s, %(finished)s, "
            "%(logs)s "
            "WHERE NOT EXISTS (SELECT 1 FROM again)) "
            "SELECT (SELECT count(*) FROM ended) + (SELECT count(*) FROM again)"
        )
        self._url = database.url
        self._engine_: Engine | None = None
        self._local = threading.local()
        self._held_lock = threading.Lock()
        self._held: list[_Held] = []
        #: Connections a forked process inherited: kept referenced, never used or closed
        #: (their sockets are the parent's).
        self._inherited: list[_Held] = []

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
        if limit is not None:
            # Counting a key's running attempts takes a transaction and the key's lock.
            return super().claim(row_id, attempt, token, lane=lane, limit=limit)
        started = dt.datetime.now(dt.UTC)
        token = token or new_claim_token()
        params = {
            "id": row_id,
            "attempt": attempt,
            "started": started,
            "due_by": due_by(started),
            "token": token,
            "lane": lane_target(lane),
        }

        def run(cursor: Any) -> Claim | _Look | None:
            cursor.execute(self._claim_sql, params)
            row = cursor.fetchone()
            if row is not None:
                return Claim(row[0], dict(row[1]), row[2], row[3], started, token, priority=row[4])
            cursor.execute(self._look_sql, params)
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
        finished = dt.datetime.now(dt.UTC)
        next_time = end.not_before or finished
        params = {
            "id": row_id,
            "task_id": str(row_id),
            "job_qn": job_qn,
            "tenant_id": tenant_id,
            "attempt": attempt,
            "row_attempt": end.row_attempt(attempt),
            "state": end.state,
            "status": end.status,
            "error": end.error,
            "started": claim.started_at,
            "finished": finished,
            "row_finished": None if end.state == PENDING else finished,
            "not_before": next_time,
            "relay_after": end.relay_after or next_time,
            "token": claim.token,
            "held": claim.held_token,
            "logs": end.logs,
        }

        def run(cursor: Any) -> bool:
            cursor.execute(self._end_sql, params)
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
