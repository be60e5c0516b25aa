"""``asanoha_job_runs``: one row per attempt, written once for a short attempt.

An attempt's row is written when it ends (status, error, start and end time). An attempt
still running after ``RUNNING_ROW_DELAY`` gets its ``running`` row first, from a background
thread, so long jobs show up while they run. Most jobs are short: they cost one statement,
and the worker thread waits for the database only once per attempt.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from sqlalchemy import Connection, Engine, Executable, Table, create_engine
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import DBAPIError

from asanoha.platform.store import Database, Tables

log = logging.getLogger("asanoha.job_runs")

FinalStatus = Literal["succeeded", "failed", "retrying"]
#: Seconds an attempt runs before its ``running`` row is written.
RUNNING_ROW_DELAY = 0.05

# Both dialects spell the upsert the same way; the portable ``insert`` has no upsert.
_INSERT: dict[str, Callable[[Table], Any]] = {
    "postgresql": postgresql.insert,
    "sqlite": sqlite.insert,
}


def describe_error(exc: BaseException) -> str:
    """The error text stored with a run and reported by ``drain()``."""
    return f"{type(exc).__name__}: {exc}"


@dataclass
class Run:
    """One attempt being recorded."""

    job_qn: str
    task_id: str
    tenant_id: str | None
    attempt: int
    started_at: dt.datetime
    #: When the ``running`` row is due (monotonic clock).
    due: float = field(default=0.0, compare=False)

    def row(
        self, status: str, error: str | None, finished_at: dt.datetime | None
    ) -> dict[str, Any]:
        """The ``asanoha_job_runs`` row of this attempt in the given state."""
        return {
            "job_qn": self.job_qn,
            "task_id": self.task_id,
            "tenant_id": self.tenant_id,
            "attempt": self.attempt,
            "status": status,
            "error": error,
            "started_at": self.started_at,
            "finished_at": finished_at,
        }


class RunRecorder:
    """Writes the run rows of job attempts.

    The statements are built once (constructing a SQLAlchemy statement costs several times
    more than sending it) and sent on a connection each thread keeps (no pool checkout, no
    ping), without a transaction around them on Postgres.
    """

    def __init__(self, database: Database, tables: Tables) -> None:
        self._own_engine = database.dialect == "postgresql"
        self._engine = _run_engine(database)
        runs = tables.job_runs
        insert = _INSERT[database.dialect](runs)
        # The row of the attempt as it ended. It also takes over the row of an earlier
        # delivery of the same attempt whose worker died mid-run.
        self._finish = insert.on_conflict_do_update(
            index_elements=["task_id", "attempt"],
            set_={
                "status": insert.excluded.status,
                "error": insert.excluded.error,
                "started_at": insert.excluded.started_at,
                "finished_at": insert.excluded.finished_at,
            },
        )
        # A ``running`` row. It replaces only an older delivery's row, never the row of
        # this very attempt, which its end may have written first.
        self._running = insert.on_conflict_do_update(
            index_elements=["task_id", "attempt"],
            set_={
                "status": insert.excluded.status,
                "error": None,
                "started_at": insert.excluded.started_at,
                "finished_at": None,
            },
            where=runs.c.started_at < insert.excluded.started_at,
        )
        self._pending = _PendingRunning(self._write_running)
        self._local = threading.local()
        self._held: list[Connection] = []
        self._lock = threading.Lock()

    def start(self, job_qn: str, task_id: str, tenant_id: str | None, attempt: int) -> Run:
        """Note that ``attempt`` started; its ``running`` row follows if it runs long."""
        run = Run(job_qn, task_id, tenant_id, attempt, dt.datetime.now(dt.UTC))
        self._pending.add(run)
        return run

    def finish(self, run: Run, status: FinalStatus, error: str | None = None) -> None:
        """Write how ``run`` ended (before the task returns, so before its message is acked)."""
        self._pending.discard(run)
        self._execute(self._finish, [run.row(status, error, dt.datetime.now(dt.UTC))])

    def close(self) -> None:
        """Stop the background writer and close the kept connections."""
        self._pending.close()
        with self._lock:
            held, self._held = self._held, []
        for conn in held:
            conn.close()
        if self._own_engine:
            self._engine.dispose()

    def _write_running(self, runs: Sequence[Run]) -> None:
        self._execute(self._running, [run.row("running", None, None) for run in runs])

    def _execute(self, statement: Executable, rows: list[dict[str, Any]]) -> None:
        # A kept connection that died (database restart) fails one statement; SQLAlchemy
        # then invalidates it and reconnects on the next use, so the statement runs again.
        for retry in (True, False):
            conn = self._connection()
            try:
                with conn.begin():
                    conn.execute(statement, rows[0] if len(rows) == 1 else rows)
                return
            except DBAPIError as error:
                if not (retry and error.connection_invalidated):
                    raise

    def _connection(self) -> Connection:
        conn: Connection | None = getattr(self._local, "conn", None)
        if conn is None or conn.closed:
            conn = self._engine.connect()
            self._local.conn = conn
            with self._lock:
                self._held.append(conn)
        return conn


class _PendingRunning:
    """Attempts whose ``running`` row is not written yet, and the thread that writes it."""

    def __init__(self, write: Callable[[Sequence[Run]], None]) -> None:
        self._write = write
        self._runs: dict[tuple[str, int], Run] = {}
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None
        self._pid = 0
        self._closed = False

    def add(self, run: Run) -> None:
        run.due = time.monotonic() + RUNNING_ROW_DELAY
        with self._changed:
            self._runs[(run.task_id, run.attempt)] = run
            # Started on first use, and again in a forked worker child (threads do not
            # survive a fork).
            if self._thread is None or self._pid != os.getpid():
                self._pid = os.getpid()
                self._closed = False
                self._thread = threading.Thread(
                    target=self._loop, name="asanoha-job-runs", daemon=True
                )
                self._thread.start()
            self._changed.notify()

    def discard(self, run: Run) -> None:
        with self._changed:
            self._runs.pop((run.task_id, run.attempt), None)

    def close(self) -> None:
        with self._changed:
            self._closed = True
            self._changed.notify()
            thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)

    def _loop(self) -> None:
        while True:
            with self._changed:
                due = self._take_due()
                while not due and not self._closed:
                    # Runs are added in start order, so the first one is due first.
                    first = next(iter(self._runs.values()), None)
                    self._changed.wait(None if first is None else first.due - time.monotonic())
                    due = self._take_due()
                if self._closed and not due:
                    return
            try:
                self._write(due)
            except Exception:
                # A missing ``running`` row hides nothing for long: the end writes the row.
                log.warning("writing running job rows failed", exc_info=True)

    def _take_due(self) -> list[Run]:
        now = time.monotonic()
        due = [run for run in self._runs.values() if run.due <= now]
        for run in due:
            del self._runs[(run.task_id, run.attempt)]
        return due


def _run_engine(database: Database) -> Engine:
    """Where run rows are written.

    On Postgres a small engine of its own, in autocommit (each write is one statement, so no
    BEGIN/COMMIT round trips) with ``synchronous_commit=off`` (no wait for the WAL flush).
    Run rows describe jobs, they are not their effects: a Postgres crash can lose the last
    fraction of a second of them, never a job's own writes, which commit through the
    service as usual.
    """
    if database.dialect != "postgresql":
        return database.engine
    return create_engine(
        database.url,
        isolation_level="AUTOCOMMIT",
        connect_args={"options": "-c synchronous_commit=off"},
        pool_size=2,
        max_overflow=8,
    )
