"""``drain()`` keeps its deadline on a broker that stops answering, and forgets what
``reset()`` or the prune wiped (SQLite would reuse run ids)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from sqlalchemy import func, select

from asanoha.platform.model import Feature
from asanoha.platform.service.job_operations import prune_job_rows
from asanoha.workers import DrainTimeoutError, JobFailedError


def _feature() -> Feature:
    feature = Feature("deadline")

    @feature.job("broken", manual=True)
    def broken(payload: dict[str, Any], ctx: Any) -> None:
        raise RuntimeError(f"broken {payload['n']}")

    return feature


def test_drain_raises_at_its_deadline_when_the_broker_stops_answering(private_redis, asanoha_stack):
    # private_redis first: it is torn down after the stack, which deletes its queues there.
    stack = asanoha_stack(
        features=[_feature()], jobs=True, settings={"broker_url": private_redis.url}
    )
    stack.drain()
    private_redis.pause()
    outcome: list[BaseException] = []

    def drain() -> None:
        try:
            stack.drain(timeout=1.0)
        except BaseException as exc:
            outcome.append(exc)

    try:
        waiting = threading.Thread(target=drain, daemon=True)
        waiting.start()
        # Generous: before, a paused Redis held drain() for as long as it stayed paused.
        waiting.join(timeout=20)
        assert not waiting.is_alive(), "drain() blocked past its deadline"
    finally:
        private_redis.resume()
    (error,) = outcome
    assert isinstance(error, DrainTimeoutError)
    assert "did not finish" in str(error)


@pytest.mark.parametrize("database", ["sqlite", "postgres"])
def test_after_reset_drain_still_reports_new_failures(asanoha_stack, database):
    stack = asanoha_stack(features=[_feature()], jobs=True, database=database)
    for n in (1, 2):
        stack.dispatch_job("deadline:job:broken", {"n": n})
    with pytest.raises(JobFailedError):
        stack.drain()
    stack.reset()
    stack.dispatch_job("deadline:job:broken", {"n": 3})
    with pytest.raises(JobFailedError, match="broken 3"):
        stack.drain()


@pytest.mark.parametrize("database", ["sqlite", "postgres"])
def test_drain_reports_a_failure_after_the_prune_emptied_the_run_rows(asanoha_stack, database):
    stack = asanoha_stack(features=[_feature()], jobs=True, database=database)
    for n in (1, 2):
        stack.dispatch_job("deadline:job:broken", {"n": n})
    with pytest.raises(JobFailedError):
        stack.drain()
    # The prune deletes every finished row: on SQLite a plain rowid would hand the next run
    # an id the drain has already seen.
    with stack.db.begin() as conn:
        assert prune_job_rows(conn, stack.tables, older_than_days=-1) == 2
        assert conn.execute(select(func.count()).select_from(stack.tables.job_runs)).scalar() == 0
    stack.dispatch_job("deadline:job:broken", {"n": 3})
    with pytest.raises(JobFailedError, match="broken 3"):
        stack.drain()


def test_a_broker_error_in_a_pass_ends_the_drain_as_a_timeout_at_its_deadline(
    asanoha_stack, monkeypatch
):
    import redis.exceptions

    from asanoha.workers.drain import Drainer

    stack = asanoha_stack(features=[_feature()], jobs=True)
    stack.drain()
    calls: list[float] = []

    def unanswered(self):
        calls.append(time.monotonic())
        raise redis.exceptions.TimeoutError("Timeout reading from socket")

    monkeypatch.setattr(Drainer, "_pass", unanswered)
    started = time.monotonic()
    with pytest.raises(DrainTimeoutError, match="did not finish") as raised:
        stack.drain(timeout=1.0)
    # Asked again until the deadline, not ended early with the broker's own error.
    assert time.monotonic() - started >= 1.0
    assert len(calls) >= 2
    assert isinstance(raised.value.__cause__, redis.exceptions.TimeoutError)
