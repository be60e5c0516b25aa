"""Concurrency modes across a fleet: two ``asanoha worker --concurrency 2`` processes
(prefork) on Postgres and a private Redis. Each job records the start and end of its attempt
as a row (``tests/e2e/concurrency_app.py``); the tests assert on those rows and on the job
rows. One fleet serves the whole module, each test its own job."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from asanoha.app import App
from asanoha.platform.model import SessionUser
from asanoha.workers.drain import Drainer
from tests.e2e.concurrency_app import feature
from tests.e2e.conftest import STEP_TIMEOUT, e2e_app, start_asanoha_worker, stop_processes
from tests.private_redis import PrivateRedis

pytestmark = pytest.mark.e2e

APP = "tests.e2e.concurrency_app:app"
SKIP, REPLACE = "conc:job:skip", "conc:job:replace"
SEQUENTIAL, QUOTA = "conc:job:sequential", "conc:job:quota"
DEBOUNCE, PAUSABLE = "conc:job:debounce", "conc:job:pausable"
#: Seconds the first wait may take: the workers are starting meanwhile.
START_TIMEOUT = 90

Interval = tuple[float, float]


@pytest.fixture(scope="module")
def fleet() -> Iterator[App]:
    """This process's view of the application (it enqueues and reads the rows), with two
    worker processes of two pool processes each running its jobs."""
    redis = PrivateRedis()
    redis.start()
    try:
        with e2e_app([feature], redis.url) as app:
            workers = [start_asanoha_worker(app.settings, APP, concurrency=2) for _ in range(2)]
            try:
                yield app
            finally:
                stop_processes(workers)
    finally:
        redis.close()


def spans(app: App, job: str) -> list[Any]:
    """The recorded attempts of ``job``, by start."""
    table = app.service.tables.entity("conc:span")
    with app.database.connect() as conn:
        return list(
            conn.execute(
                select(
                    table.c.key, table.c.n, table.c.tenant, table.c.started, table.c.ended
                ).where(table.c.job == job)
            ).all()
        )


def intervals(found: list[Any], **where: Any) -> list[Interval]:
    return sorted(
        (span.started, span.ended)
        for span in found
        if all(getattr(span, name) == value for name, value in where.items())
    )


def overlap(first: list[Interval], second: list[Interval]) -> bool:
    return any(a < d and c < b for a, b in first for c, d in second)


def most_at_once(spans_of_one: list[Interval]) -> int:
    """The most intervals that run at one moment (an end before a start at the same
    moment)."""
    moments = sorted(
        [(start, 1) for start, _ in spans_of_one] + [(end, -1) for _, end in spans_of_one]
    )
    running = most = 0
    for _, step in moments:
        running += step
        most = max(most, running)
    return most


def job_rows(app: App, qn: str) -> dict[uuid.UUID, Any]:
    outbox = app.service.tables.outbox
    with app.database.connect() as conn:
        rows = conn.execute(
            select(outbox.c.id, outbox.c.state, outbox.c.attempt, outbox.c.claim_token).where(
                outbox.c.job_qn == qn
            )
        ).all()
    return {uuid.UUID(str(row.id)): row for row in rows}


def wait_until(check: Callable[[], bool], what: str, within: float = STEP_TIMEOUT) -> None:
    """Poll the database: the work happens in other processes."""
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {within} s: {what}")
        time.sleep(0.05)


def enqueue_at_once(count: int, enqueue: Callable[[int], uuid.UUID]) -> list[uuid.UUID]:
    """Call ``enqueue(i)`` from ``count`` threads released together."""
    barrier = threading.Barrier(count)
    results: list[uuid.UUID | None] = [None] * count
    errors: list[BaseException] = []

    def one(index: int) -> None:
        barrier.wait()
        try:
            results[index] = enqueue(index)
        except BaseException as exc:  # reported below, on the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return [result for result in results if result is not None]


def test_skip_runs_one_row_for_fifty_concurrent_enqueues_of_a_key(fleet, tmp_path: Path):
    app = fleet
    # The job holds until the gate opens: every enqueue meets the key's row pending or running.
    gate = str(tmp_path / "open")
    ids = enqueue_at_once(50, lambda i: app.jobs.run(SKIP, {"key": "a", "n": i, "gate": gate}))
    other = app.jobs.run(SKIP, {"key": "b", "n": 0, "gate": gate})
    assert len(ids) == 50 and len(set(ids)) == 1
    assert other != ids[0]
    assert set(job_rows(app, SKIP)) == {ids[0], other}
    wait_until(
        lambda: {row.state for row in job_rows(app, SKIP).values()} == {"running"},
        "both keys' rows running",
        START_TIMEOUT,
    )
    Path(gate).touch()
    Drainer(app).drain(timeout=60)
    found = spans(app, "skip")
    assert sorted(span.key for span in found) == ["a", "b"]
    # The other key ran beside it.
    assert overlap(intervals(found, key="a"), intervals(found, key="b"))
    assert {row.state for row in job_rows(app, SKIP).values()} == {"succeeded"}


def test_replace_runs_the_first_and_the_last_and_cancels_the_rest(fleet):
    app = fleet
    first = app.jobs.run(REPLACE, {"n": 0, "hold": True})
    wait_until(lambda: job_rows(app, REPLACE)[first].state == "running", "the first running")
    # Each later row waits a second, so the next enqueue finds it pending and cancels it.
    later = [app.jobs.run(REPLACE, {"n": n}, delay=1.0) for n in range(1, 21)]
    Drainer(app).drain(timeout=60)
    rows = job_rows(app, REPLACE)
    assert rows[first].state == "succeeded"  # it stopped when asked, and ended
    assert [rows[row_id].state for row_id in later] == ["cancelled"] * 19 + ["succeeded"]
    assert sorted(span.n for span in spans(app, "replace")) == [0, 20]


def test_sequential_runs_one_attempt_of_a_key_at_a_time_and_keys_beside_each_other(fleet):
    app = fleet
    for n in range(30):
        app.jobs.run(SEQUENTIAL, {"key": "a", "n": n})
    for n in range(10):
        app.jobs.run(SEQUENTIAL, {"key": "b", "n": n})
    Drainer(app).drain(timeout=90)
    found = spans(app, "sequential")
    a, b = intervals(found, key="a"), intervals(found, key="b")
    assert (len(a), len(b)) == (30, 10)
    # No two recorded intervals of one key intersect.
    assert most_at_once(a) == 1 and most_at_once(b) == 1
    assert overlap(a, b)
    # Each key ran in the order it was enqueued, and waiting spent no attempt.
    for key in ("a", "b"):
        order = [span.n for span in sorted(found, key=lambda s: s.started) if span.key == key]
        assert order == sorted(order)
    rows = job_rows(app, SEQUENTIAL).values()
    assert {(row.state, row.attempt) for row in rows} == {("succeeded", 1)}


def test_max_per_tenant_runs_at_most_two_of_a_tenant_and_holds_no_other_back(fleet, tmp_path: Path):
    app = fleet
    gate = str(tmp_path / "open")
    t1 = [
        app.jobs.run(QUOTA, {"n": n, "gate": gate}, user=SessionUser.system("t1")) for n in range(8)
    ]
    for n in range(2):
        app.jobs.run(QUOTA, {"n": n}, user=SessionUser.system("t2"))
    # The other tenant runs to its end while the first one holds both its slots.
    wait_until(
        lambda: len(intervals(spans(app, "quota"), tenant="t2")) == 2,
        "the other tenant's jobs ran",
    )
    rows = job_rows(app, QUOTA)
    assert [rows[row_id].state for row_id in t1].count("running") == 2
    Path(gate).touch()
    Drainer(app).drain(timeout=60)
    found = spans(app, "quota")
    first, other = intervals(found, tenant="t1"), intervals(found, tenant="t2")
    assert len(first) == 8
    assert most_at_once(first) == 2
    assert max(end for _, end in other) < min(end for _, end in first)
    rows = job_rows(app, QUOTA)
    assert {(row.state, row.attempt) for row in rows.values()} == {("succeeded", 1)}


def test_debounce_runs_once_a_window_after_the_last_enqueue_with_its_payload(fleet):
    app = fleet
    ids = []
    for n in range(10):
        last = time.time()
        ids.append(app.jobs.run(DEBOUNCE, {"key": "d", "n": n}))
        time.sleep(0.05)
    Drainer(app).drain(timeout=60)
    assert len(set(ids)) == 1
    found = spans(app, "debounce")
    assert [span.n for span in found] == [9]
    assert found[0].started - last >= 1.0
    assert [row.state for row in job_rows(app, DEBOUNCE).values()] == ["succeeded"]


def test_a_paused_job_runs_on_no_worker_until_resumed(fleet):
    app = fleet
    assert app.jobs.pause(PAUSABLE).changed
    ids = [app.jobs.run(PAUSABLE, {"n": n}) for n in range(6)]
    # Every delivery reached a worker, which left its row waiting, unrun.
    wait_until(
        lambda: [row.claim_token for row in job_rows(app, PAUSABLE).values()] == ["waiting"] * 6,
        "every row waiting",
    )
    summary = Drainer(app).drain(timeout=30)
    assert summary.paused == {PAUSABLE: 6}
    assert spans(app, "pausable") == []
    rows = job_rows(app, PAUSABLE)
    assert {(rows[row_id].state, rows[row_id].attempt) for row_id in ids} == {("pending", 0)}

    assert app.jobs.resume(PAUSABLE).changed
    Drainer(app).drain(timeout=60)
    assert sorted(span.n for span in spans(app, "pausable")) == list(range(6))
    assert {row.state for row in job_rows(app, PAUSABLE).values()} == {"succeeded"}
