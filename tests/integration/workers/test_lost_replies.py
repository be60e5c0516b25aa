"""Database failures while a worker claims or ends an attempt (Postgres): a connection that
dies after the commit, before the reply, and a database that refuses new connections. No
row is left running without a message that comes back, and each attempt is recorded once.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from asanoha.platform.jobs.attempts import AttemptEnd, Claim, JobRowsUnavailable, job_rows_for
from asanoha.platform.jobs.attempts_postgres import PostgresJobRows
from asanoha.platform.model import Backoff, Feature, SessionUser
from asanoha.platform.service import OutboxMessage
from tests.integration.workers.conftest import database_backends, job_rows, job_runs, wait_until


def _feature(seen: list[Any]) -> Feature:
    feature = Feature("lost")

    @feature.job("once", manual=True)
    def once(payload: dict[str, Any], ctx: Any) -> None:
        seen.append(("once", ctx.attempt))

    @feature.job("flaky", manual=True, retries=1, backoff=Backoff.fixed(0.05))
    def flaky(payload: dict[str, Any], ctx: Any) -> None:
        seen.append(("flaky", ctx.attempt))
        if ctx.attempt == 1:
            raise RuntimeError("first attempt fails")

    # A short timeout: an attempt whose end was lost is judged crashed once its hard time
    # limit (timeout + grace) has passed, not before.
    @feature.job("patient", manual=True, retries=1, backoff=Backoff.fixed(0.05), timeout=1)
    def patient(payload: dict[str, Any], ctx: Any) -> None:
        seen.append(("patient", ctx.attempt))

    return feature


class _CursorDyingAfter:
    """A driver cursor whose connection is terminated by the server right after the first
    statement of ``sql`` committed, so that the reply of the next round trip is lost as in
    a database restart at that moment."""

    def __init__(self, cursor: Any, sql: str, killed: list[int], kill: Callable[[int], None]):
        self._cursor = cursor
        self._sql = sql
        self._killed = killed
        self._kill = kill

    def execute(self, sql: str, params: Any = None) -> Any:
        result = self._cursor.execute(sql, params)
        if sql == self._sql and not self._killed:
            self._kill(self._cursor.connection.info.backend_pid)
            # Raises as the first statement would have, had the server died before replying.
            self._cursor.execute("SELECT 1")
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)


class _RecordingPublisher:
    """Publishes through ``real`` and records the attempt of each message."""

    def __init__(self, real: Any) -> None:
        self._real = real
        self.attempts: list[int] = []

    def publish(self, message: OutboxMessage) -> None:
        self._real.publish(message)
        self.attempts.append(message.attempt)


def _rows(stack: Any) -> PostgresJobRows:
    rows = stack.app.celery_jobs.rows
    assert isinstance(rows, PostgresJobRows)
    return rows


def _lose_the_reply_of(stack: Any, monkeypatch: pytest.MonkeyPatch, sql: str) -> list[int]:
    """Make the first statement ``sql`` of the worker's job rows commit, then lose its
    connection. Returns the list of terminated backends."""
    rows = _rows(stack)
    killed: list[int] = []

    def kill(pid: int) -> None:
        killed.append(pid)
        with stack.db.engine.connect() as conn:
            # Waits until the backend is gone, so the next round trip fails for sure.
            conn.execute(text("SELECT pg_terminate_backend(:pid, 5000)"), {"pid": pid})

    real = rows._with_cursor

    def with_cursor(run: Callable[[Any], Any]) -> Any:
        return real(lambda cursor: run(_CursorDyingAfter(cursor, sql, killed, kill)))

    monkeypatch.setattr(rows, "_with_cursor", with_cursor)
    return killed


@contextmanager
def _refusing_connections(stack: Any) -> Iterator[None]:
    """The stack's database refuses new connections (as while it restarts), and the job
    rows' pooled ones are gone."""
    maintenance = create_engine(
        make_url(stack.db.url).set(database="postgres"), isolation_level="AUTOCOMMIT"
    )
    name = stack.database_name
    try:
        with maintenance.connect() as conn:
            conn.execute(text(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS false'))
        _rows(stack).close()
        try:
            yield
        finally:
            with maintenance.connect() as conn:
                conn.execute(text(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS true'))
    finally:
        maintenance.dispose()


def test_a_claim_whose_reply_was_lost_after_commit_runs_the_job(jobs_stack, monkeypatch):
    seen: list[Any] = []
    stack = jobs_stack([_feature(seen)])
    killed = _lose_the_reply_of(stack, monkeypatch, _rows(stack)._claim_sql.sql)
    stack.dispatch_job("lost:job:once", {})
    stack.drain()
    assert len(killed) == 1
    assert seen == [("once", 1)]
    assert [(r.attempt, r.status) for r in job_runs(stack)] == [(1, "succeeded")]
    (row,) = job_rows(stack)
    assert (row.state, row.attempt) == ("succeeded", 1)


def test_an_end_whose_reply_was_lost_is_recorded_once_and_publishes_the_next_attempt(
    jobs_stack, monkeypatch
):
    seen: list[Any] = []
    stack = jobs_stack([_feature(seen)])
    killed = _lose_the_reply_of(stack, monkeypatch, _rows(stack)._end_sql.sql)
    runner = stack.app.celery_jobs.runner
    retries = _RecordingPublisher(runner.publisher)
    monkeypatch.setattr(runner, "publisher", retries)
    stack.dispatch_job("lost:job:flaky", {})
    stack.drain()
    assert len(killed) == 1
    assert seen == [("flaky", 1), ("flaky", 2)]
    assert [(r.attempt, r.status) for r in job_runs(stack)] == [(1, "retrying"), (2, "succeeded")]
    (row,) = job_rows(stack)
    assert (row.state, row.attempt) == ("succeeded", 2)
    # The worker published the next attempt as usual (not the relay, after its grace).
    assert retries.attempts == [2]


def test_a_claim_while_the_database_refuses_connections_gives_the_message_back(
    jobs_stack, monkeypatch
):
    seen: list[Any] = []
    stack = jobs_stack([_feature(seen)])
    rows = _rows(stack)
    real = rows.claim
    refused: list[BaseException] = []

    def claim(row_id: uuid.UUID, attempt: int, **options: Any) -> Any:
        if refused:
            return real(row_id, attempt, **options)
        with _refusing_connections(stack):
            try:
                return real(row_id, attempt, **options)
            except JobRowsUnavailable as exc:
                refused.append(exc)
                raise

    monkeypatch.setattr(rows, "claim", claim)
    stack.dispatch_job("lost:job:once", {})
    stack.drain()
    assert "not currently accepting connections" in str(refused[0])
    assert seen == [("once", 1)]
    assert [(r.attempt, r.status) for r in job_runs(stack)] == [(1, "succeeded")]


def test_an_end_while_the_database_refuses_connections_counts_as_a_crashed_attempt(
    jobs_stack, monkeypatch
):
    """The attempt ran but its end could not be written: the message comes back, and its
    redelivery ends the attempt as crashed once its hard time limit has passed (at least
    once: the next attempt runs)."""
    seen: list[Any] = []
    stack = jobs_stack([_feature(seen)])
    rows = _rows(stack)
    real = rows.end
    refused: list[BaseException] = []

    def end(*args: Any) -> bool:
        if refused:
            return real(*args)
        with _refusing_connections(stack):
            try:
                return real(*args)
            except JobRowsUnavailable as exc:
                refused.append(exc)
                raise

    monkeypatch.setattr(rows, "end", end)
    stack.dispatch_job("lost:job:patient", {})
    stack.drain(timeout=30)
    assert len(refused) == 1
    assert seen == [("patient", 1), ("patient", 2)]
    assert [(r.attempt, r.status) for r in job_runs(stack)] == [(1, "crashed"), (2, "succeeded")]


@pytest.mark.parametrize("database", ["postgres", "sqlite"])
def test_a_claim_or_an_end_sent_again_recognises_its_own_write(asanoha_stack, database):
    """The statements themselves, on both databases: the same claim twice claims once; the
    same end twice records one run; another delivery's claim is refused."""
    stack = asanoha_stack(features=[_feature([])], database=database)
    rows = job_rows_for(stack.db, stack.tables)
    row_id = stack.service.enqueue_job("lost:job:once", {}, SessionUser.system("default"))
    first = rows.claim(row_id, 1)
    assert isinstance(first, Claim)
    token = first.token
    assert token is not None
    # The same delivery's claim again (what a retry after a lost reply sends).
    again = rows.claim(row_id, 1, token)
    assert isinstance(again, Claim)
    # Another delivery of the same attempt finds it running.
    other = rows.claim(row_id, 1)
    assert not isinstance(other, Claim)
    assert (other.state, other.attempt) == ("running", 1)
    ended = AttemptEnd("succeeded", "succeeded")
    assert rows.end(row_id, "lost:job:once", "default", 1, first, ended)
    assert rows.end(row_id, "lost:job:once", "default", 1, first, ended)
    assert [(r.attempt, r.status) for r in job_runs(stack)] == [(1, "succeeded")]
    assert job_rows(stack)[0].state == "succeeded"
    rows.close()


def test_each_thread_keeps_one_claim_connection_and_close_releases_them(asanoha_stack):
    """Claims and ends reuse the connection their thread checked out (a checkout per
    statement costs about as much as the statement); a connection that died is replaced,
    and ``close()`` closes the ones threads still hold."""
    stack = asanoha_stack(features=[_feature([])])
    rows = _rows_of(stack)
    before = database_backends(stack)
    used: dict[str, set[int]] = {}
    real = rows._with_cursor

    def recording(run: Callable[[Any], Any]) -> Any:
        def on(cursor: Any) -> Any:
            name = threading.current_thread().name
            used.setdefault(name, set()).add(cursor.connection.info.backend_pid)
            return run(cursor)

        return real(on)

    rows._with_cursor = recording  # type: ignore[method-assign]

    def claims() -> None:
        for _ in range(10):
            assert rows.claim(uuid.uuid4(), 1).state == "missing"

    threads = [threading.Thread(target=claims, name=f"claims-{n}") for n in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    claims()
    assert sorted(len(pids) for pids in used.values()) == [1, 1, 1, 1]
    held = set().union(*used.values())
    assert database_backends(stack) - before == held
    # Killed under its holder, as in a database restart: the first claim fails on it and
    # runs again on a new connection, which the thread keeps.
    (own,) = used.pop(threading.current_thread().name)
    with stack.db.engine.connect() as conn:
        conn.execute(text("SELECT pg_terminate_backend(:pid, 5000)"), {"pid": own})
    claims()
    assert len(used[threading.current_thread().name] - {own}) == 1
    rows.close()
    wait_until(lambda: database_backends(stack) == before)


def _rows_of(stack: Any) -> PostgresJobRows:
    rows = job_rows_for(stack.db, stack.tables)
    assert isinstance(rows, PostgresJobRows)
    return rows
