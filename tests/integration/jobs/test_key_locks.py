"""The locks of a job row's keys, and the one-round-trip transactions that take them on
Postgres: a limited claim and a wake pipeline ``BEGIN; lock; ...; COMMIT``, and must
hold the same lock that every other holder of the key takes, computed the same way."""

from __future__ import annotations

import datetime as dt
import secrets
import threading
import uuid
from typing import Any

import psycopg
import pytest
from sqlalchemy import insert, literal, select, text

from asanoha import Concurrency
from asanoha.platform.jobs import enqueue
from asanoha.platform.jobs.attempts import AttemptEnd, Claim, ClaimLimit, job_rows_for
from asanoha.platform.jobs.attempts_postgres import CompiledTransaction, PostgresJobRows
from asanoha.platform.jobs.key_locks import lock_id, lock_id_of
from asanoha.platform.jobs.message import OutboxMessage
from asanoha.platform.jobs.states import SUCCEEDED, WAITING_TOKEN
from asanoha.platform.model import Feature

feature = Feature("keylocks")


@feature.job("apply", manual=True, concurrency=Concurrency.sequential(key=["k"]))
def apply(payload: dict[str, Any], ctx: Any) -> None:
    return None


QN = "keylocks:job:apply"
#: Seconds a claim or a wake is watched while another transaction holds its key's lock.
BLOCKED_FOR = 0.5


def test_the_database_computes_a_keys_lock_id_as_python_does(asanoha_stack: Any) -> None:
    stack = asanoha_stack(features=[feature], database="postgres")
    edges = ["0" * 64, "f" * 64, "7" + "f" * 63, "8" + "0" * 63, "0123456789abcdef" * 4]
    keys = edges + [secrets.token_hex(32) for _ in range(200)]
    with stack.db.engine.connect() as conn:
        for key in keys:
            assert conn.execute(lock_id_of(key)).scalar_one() == lock_id(key), key


def test_a_compiled_transaction_keeps_each_statements_constants_and_commits_as_one(
    asanoha_stack: Any,
) -> None:
    stack = asanoha_stack(features=[feature], database="postgres")
    dialect = stack.db.engine.dialect
    pauses = stack.tables.job_pauses
    both = CompiledTransaction.compile([select(literal(1)), select(literal("two"))], dialect, set())
    failing = CompiledTransaction.compile(
        [
            insert(pauses).values(target="keylocks:job:apply", paused_at=dt.datetime.now(dt.UTC)),
            select(text("CAST('not a number' AS integer)")),
        ],
        dialect,
        set(),
    )
    raw = psycopg.connect(_conninfo(stack), autocommit=True)
    try:
        cursor = raw.cursor()
        assert both.execute(cursor, {}) == [[(1,)], [("two",)]]
        # Twice: a statement sent again is prepared, its constants still its own.
        assert both.execute(cursor, {}) == [[(1,)], [("two",)]]
        with pytest.raises(psycopg.errors.InvalidTextRepresentation):
            failing.execute(cursor, {})
    finally:
        raw.close()
    # The insert before the failing statement went with it.
    with stack.db.engine.connect() as conn:
        assert conn.execute(select(pauses.c.target)).all() == []


def test_a_compiled_transactions_constants_are_sent_as_written_on_every_connection(
    asanoha_stack: Any,
) -> None:
    stack = asanoha_stack(features=[feature], database="postgres")
    dialect = stack.db.engine.dialect
    # Written into the statement's text: quotes and the driver's own "%" survive it.
    quoted = CompiledTransaction.compile(
        [
            select(literal("it's 100%s %(param_2)s"), literal(-7)),
            select(literal(None), literal("%%")),
        ],
        dialect,
        set(),
    )
    first = psycopg.connect(_conninfo(stack), autocommit=True)
    second = psycopg.connect(_conninfo(stack), autocommit=True)
    expected = [[("it's 100%s %(param_2)s", -7)], [(None, "%%")]]
    try:
        assert quoted.execute(first.cursor(), {}) == expected
        assert quoted.execute(second.cursor(), {}) == expected
        first.close()
        # A connection closed meanwhile takes its statements' cursors with it.
        third = psycopg.connect(_conninfo(stack), autocommit=True)
        try:
            assert quoted.execute(third.cursor(), {}) == expected
            assert quoted.execute(second.cursor(), {}) == expected
        finally:
            third.close()
    finally:
        first.close()
        second.close()


def test_a_limited_claim_and_a_wake_wait_for_their_keys_lock(asanoha_stack: Any) -> None:
    stack = asanoha_stack(features=[feature], database="postgres")
    job = stack.app.registry.job(QN)
    rows = job_rows_for(stack.db, stack.tables)
    assert isinstance(rows, PostgresJobRows)
    first, second = place(stack, job), place(stack, job)
    key = key_of(stack, first)

    claimed = while_locked(stack, key, lambda: rows.claim(first, 1, limit=ClaimLimit.of(job)))
    assert isinstance(claimed, Claim)
    # The key is busy: the second row's claim leaves it waiting.
    waiting = rows.claim(second, 1, limit=ClaimLimit.of(job))
    assert not isinstance(waiting, Claim) and waiting.waiting
    assert token_of(stack, second) == WAITING_TOKEN
    assert rows.end(first, QN, "default", 1, claimed, AttemptEnd("succeeded", SUCCEEDED))

    woken = while_locked(stack, key, lambda: rows.wake(first))
    assert [(row.id, row.attempt) for row in woken] == [(second, 1)]
    assert token_of(stack, second) is None
    # Woken once: a second wake finds nothing waiting.
    assert rows.wake(first) == []
    assert isinstance(rows.claim(second, 1, limit=ClaimLimit.of(job)), Claim)


def test_the_end_of_a_limited_attempt_wakes_its_waiting_row_in_its_transaction(
    asanoha_stack: Any,
) -> None:
    stack = asanoha_stack(features=[feature], database="postgres")
    job = stack.app.registry.job(QN)
    rows = job_rows_for(stack.db, stack.tables)
    first, second = place(stack, job), place(stack, job)
    key = key_of(stack, first)
    claimed = rows.claim(first, 1, limit=ClaimLimit.of(job))
    assert isinstance(claimed, Claim)
    assert not isinstance(rows.claim(second, 1, limit=ClaimLimit.of(job)), Claim)
    end = AttemptEnd("succeeded", SUCCEEDED)

    # The end waits for the key's lock with the wake: neither is committed before it has it.
    ended, woken = while_locked(
        stack, key, lambda: rows.end_and_wake(first, QN, "default", 1, claimed, end)
    )
    assert ended
    assert [(row.id, row.attempt) for row in woken] == [(second, 1)]
    assert token_of(stack, second) is None
    # Sent again (its reply lost): the end is not written twice, nothing more is woken.
    assert rows.end_and_wake(first, QN, "default", 1, claimed, end) == (True, [])
    runs = stack.tables.job_runs
    with stack.db.engine.connect() as conn:
        assert conn.execute(select(runs.c.status)).scalars().all() == ["succeeded"]
    assert isinstance(rows.claim(second, 1, limit=ClaimLimit.of(job)), Claim)


def place(stack: Any, job: Any) -> uuid.UUID:
    message = OutboxMessage(
        uuid.uuid4(), QN, payload={"k": "one"}, headers={"tenant_id": "default"}
    )
    with stack.db.begin() as conn:
        return enqueue.place(conn, stack.tables, job, message).job_id


def key_of(stack: Any, row_id: uuid.UUID) -> str:
    outbox = stack.tables.outbox
    with stack.db.engine.connect() as conn:
        key: str = conn.execute(
            select(outbox.c.concurrency_key).where(outbox.c.id == row_id)
        ).scalar_one()
    return key


def token_of(stack: Any, row_id: uuid.UUID) -> str | None:
    outbox = stack.tables.outbox
    with stack.db.engine.connect() as conn:
        token: str | None = conn.execute(
            select(outbox.c.claim_token).where(outbox.c.id == row_id)
        ).scalar_one()
    return token


def while_locked(stack: Any, key: str, call: Any) -> Any:
    """Run ``call`` in a thread while another transaction holds ``key``'s lock: it must
    not return before the lock is let go, and returns once it is."""
    done = threading.Event()
    result: list[Any] = []

    def run() -> None:
        result.append(call())
        done.set()

    with stack.db.engine.connect() as holder:
        holder.execute(text("SELECT pg_advisory_xact_lock(:lock)"), {"lock": lock_id(key)})
        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        assert not done.wait(BLOCKED_FOR), "the call went on while its key was locked"
        holder.commit()
    assert done.wait(30), "the call did not go on once its key's lock was let go"
    thread.join()
    return result[0]


def _conninfo(stack: Any) -> str:
    url = stack.db.engine.url
    return f"host={url.host} port={url.port or 5432} user={url.username} dbname={url.database}"
