"""``asanoha_job_runs``: one row per attempt, written behind the job by one thread.

The worker thread only notes what happened; a writer thread sends the rows, many per
statement when jobs end together. An attempt's row is written when it ends (status, error,
start and end time); an attempt still running after ``RUNNING_ROW_DELAY`` gets its
``running`` row first, so long jobs show up while they run. ``flush()`` waits until every
ended attempt is written (``drain()`` calls it before reading the rows).

Writing behind keeps a database round trip off every job: the rows are the record of the
jobs, not their effects (those commit through the service as usual). A process that stops
normally writes what it holds first (at interpreter exit, and when a pool process shuts
down); one killed in the millisecond after a job ended can lose that job's row.
"""

from __future__ import annotations

import atexit
import datetime as dt
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from celery import Celery
from sqlalchemy import Connection, Engine, Executable, Table, create_engine
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import DBAPIError

from asanoha.platform.store import Database, Tables

log = logging.getLogger("asanoha.job_runs")

FinalStatus = Literal["succeeded", "failed", "retrying"]
#: Seconds an attempt runs before its ``running`` row is written.
RUNNING_ROW_DELAY = 0.05

#: Seconds the writer waits for more ended attempts before writing a batch.
WRITE_LINGER = 0.002

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
    more than sending it) and sent on a connection the writer keeps (no pool checkout, no
    ping), without a transaction around them on Postgres.
    """

    def __init__(self, database: Database, tables: Tables) -> None:
        self._own_engine = database.dialect == "postgresql"
        self._engine = _run_engine(database)
        runs = tables.job_runs
        insert = _INSERT[database.dialect](runs)
        # The row of the attempt as it ended. It also takes over the row of an earlier
        # delivery of the same attempt whose worker died mid-run.
        self._upsert_ended = insert.on_conflict_do_update(
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
        self._upsert_running = insert.on_conflict_do_update(
            index_elements=["task_id", "attempt"],
            set_={
                "status": insert.excluded.status,
                "error": None,
                "started_at": insert.excluded.started_at,
                "finished_at": None,
            },
            where=runs.c.started_at < insert.excluded.started_at,
        )
        self._writer = _RunWriter(self._write)
        self._local = threading.local()
        self._held: list[Connection] = []
        self._lock = threading.Lock()

    def start(self, job_qn: str, task_id: str, tenant_id: str | None, attempt: int) -> Run:
        """Note that ``attempt`` started; its ``running`` row follows if it runs long."""
        run = Run(job_qn, task_id, tenant_id, attempt, dt.datetime.now(dt.UTC))
        self._writer.add_running(run)
        return run

    def finish(self, run: Run, status: FinalStatus, error: str | None = None) -> None:
        """Note how ``run`` ended; the writer thread writes its row."""
        self._writer.add_ended(run, run.row(status, error, dt.datetime.now(dt.UTC)))

    def flush(self, timeout: float = 10.0) -> None:
        """Wait until every attempt noted as ended so far is written."""
        self._writer.flush(timeout)

    def flush_before_exit(self, **_: Any) -> None:
        """Celery ``worker_process_shutdown`` receiver: a pool process that exits (recycled,
        or the worker stops) writes its last rows first."""
        self._writer.flush(timeout=5.0)

    def close(self) -> None:
        """Write what is left, stop the writer and close the connections."""
        self._writer.close()
        with self._lock:
            held, self._held = self._held, []
        for conn in held:
            conn.close()
        if self._own_engine:
            self._engine.dispose()

    def _write(self, ended: list[dict[str, Any]], running: Sequence[Run]) -> None:
        if ended:
            self._execute(self._upsert_ended, ended)
        if running:
            rows = [run.row("running", None, None) for run in running]
            self._execute(self._upsert_running, rows)

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


_ATTRIBUTE = "asanoha_run_recorder"


def attach_recorder(celery: Celery, recorder: RunRecorder) -> None:
    """Keep ``recorder`` with the Celery application whose tasks use it."""
    setattr(celery, _ATTRIBUTE, recorder)


def recorder_of(celery: Celery) -> RunRecorder | None:
    """The run recorder ``make_celery`` attached to ``celery``."""
    recorder: RunRecorder | None = getattr(celery, _ATTRIBUTE, None)
    return recorder


class _RunWriter:
    """The rows waiting to be written, and the thread that writes them."""

    def __init__(self, write: Callable[[list[dict[str, Any]], Sequence[Run]], None]) -> None:
        self._write = write
        self._running: dict[tuple[str, int], Run] = {}
        self._ended: list[dict[str, Any]] = []
        self._writing = False
        #: Callers waiting in ``flush()``: the writer does not linger for them.
        self._flushing = 0
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None
        self._pid = 0
        self._closed = False

    def add_running(self, run: Run) -> None:
        run.due = time.monotonic() + RUNNING_ROW_DELAY
        with self._changed:
            was_idle = not self._running and not self._ended
            self._running[(run.task_id, run.attempt)] = run
            self._ensure_thread()
            # The writer sleeps until the first pending run is due; a later run is due
            # later, so only the first one needs to wake it (waking it per job costs more
            # than the job).
            if was_idle:
                self._changed.notify_all()

    def add_ended(self, run: Run, row: dict[str, Any]) -> None:
        with self._changed:
            self._running.pop((run.task_id, run.attempt), None)
            self._ended.append(row)
            self._ensure_thread()
            if len(self._ended) == 1:
                self._changed.notify_all()

    def flush(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with self._changed:
            self._flushing += 1
            self._changed.notify_all()
            try:
                while self._ended or self._writing:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise TimeoutError(f"job run rows were not written within {timeout:g} s")
                    self._changed.wait(remaining)
            finally:
                self._flushing -= 1

    def close(self) -> None:
        with self._changed:
            self._closed = True
            self._changed.notify_all()
            thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=10)

    def _ensure_thread(self) -> None:
        # Started on first use, and again in a forked worker child (threads do not survive
        # a fork).
        if self._thread is None or self._pid != os.getpid():
            _live_writers.add(self)
            self._pid = os.getpid()
            self._closed = False
            self._thread = threading.Thread(target=self._loop, name="asanoha-job-runs", daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        while True:
            with self._changed:
                ended, running = self._take()
                while not ended and not running and not self._closed:
                    # Runs are added in start order, so the first one is due first.
                    first = next(iter(self._running.values()), None)
                    self._changed.wait(None if first is None else first.due - time.monotonic())
                    ended, running = self._take()
                if not ended and not running:
                    return  # closed, nothing left
                # Set before lingering: the rows taken are out of the list but not written,
                # and flush() must keep waiting for them.
                self._writing = True
                if ended and not self._closed and not self._flushing:
                    # Jobs tend to end in bursts: one statement for the whole burst costs
                    # the database and this process far less than one per row.
                    until = time.monotonic() + WRITE_LINGER
                    while not self._closed and not self._flushing:
                        remaining = until - time.monotonic()
                        if remaining <= 0:
                            break
                        self._changed.wait(remaining)
                    more, due = self._take()
                    ended += more
                    running += due
            try:
                self._write(ended, running)
            except Exception:
                log.error(
                    "writing %d job run rows failed", len(ended) + len(running), exc_info=True
                )
            finally:
                with self._changed:
                    self._writing = False
                    self._changed.notify_all()

    def _take(self) -> tuple[list[dict[str, Any]], list[Run]]:
        ended, self._ended = self._ended, []
        now = time.monotonic()
        due = [run for run in self._running.values() if run.due <= now]
        for run in due:
            del self._running[(run.task_id, run.attempt)]
        return ended, due


#: Writers with a thread in this process; the interpreter's exit writes what they hold.
_live_writers: weakref.WeakSet[_RunWriter] = weakref.WeakSet()


@atexit.register
def _flush_at_exit() -> None:
    # The writer thread is a daemon: without this, a worker that stops normally right
    # after a job ended would drop that job's row.
    for writer in list(_live_writers):
        try:
            writer.flush(timeout=5.0)
        except Exception:
            log.error("job run rows were lost at exit", exc_info=True)


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
