"""Concurrency modes, ``max_per_tenant`` and ``unique_for`` on the job rows, with an
in-process worker of three threads: each job records when its attempt started and ended,
and the tests assert on those intervals and on the rows."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel
from sqlalchemy import select

from asanoha import Concurrency
from asanoha.platform.model import Access, Feature, SessionUser
from tests.integration.workers.conftest import job_rows, job_runs


class Intervals:
    """Start and end of every attempt, by job key, across the worker's threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.spans: list[tuple[str, Any, float, float]] = []
        self.release = threading.Event()

    def run(self, key: str, payload: Any, seconds: float) -> None:
        started = time.monotonic()
        time.sleep(seconds)
        with self.lock:
            self.spans.append((key, payload, started, time.monotonic()))

    def of(self, key: str) -> list[tuple[float, float]]:
        return sorted((start, end) for k, _, start, end in self.spans if k == key)

    def most_at_once(self, key: str) -> int:
        moments = sorted(
            [(start, 1) for start, _ in self.of(key)] + [(end, -1) for _, end in self.of(key)],
            key=lambda moment: (moment[0], moment[1]),
        )
        running = most = 0
        for _, step in moments:
            running += step
            most = max(most, running)
        return most


def overlap(first: list[tuple[float, float]], second: list[tuple[float, float]]) -> bool:
    return any(a < d and c < b for a, b in first for c, d in second)


def enqueue_at_once(count: int, enqueue: Callable[[int], Any]) -> list[Any]:
    """Call ``enqueue(i)`` from ``count`` threads released together."""
    barrier = threading.Barrier(count)
    results: list[Any] = [None] * count

    def one(index: int) -> None:
        barrier.wait()
        results[index] = enqueue(index)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def test_skip_returns_the_pending_row_of_the_key_to_concurrent_enqueues(jobs_stack):
    feature = Feature("skipping")
    spans = Intervals()

    @feature.job("sync", manual=True, concurrency=Concurrency.skip(key=["account"]))
    def sync(payload: dict[str, Any], ctx: Any) -> None:
        spans.run(payload["account"], payload, 0.05)

    stack = jobs_stack([feature])
    qn = "skipping:job:sync"
    ids = enqueue_at_once(
        20, lambda i: stack.app.jobs.run(qn, {"account": "a", "n": i}, delay=3600)
    )
    other = stack.app.jobs.run(qn, {"account": "b"}, delay=3600)
    assert len(set(ids)) == 1
    assert other not in ids
    rows = job_rows(stack, qn)
    assert sorted(str(row.id) for row in rows) == sorted({str(ids[0]), str(other)})
    # Once the key's row has run, the next enqueue makes a new one.
    for row_id in (ids[0], other):
        stack.app.jobs.cancel(row_id)
    again = stack.app.jobs.run(qn, {"account": "a"})
    assert again != ids[0]
    stack.drain()
    assert [key for key, *_ in spans.spans] == ["a"]


class Ping(BaseModel):
    account: str


def test_skip_holds_on_the_write_triggered_path(jobs_stack):
    feature = Feature("skipwrite")

    @feature.write_handler("ping", access=Access(roles=["system"]))
    def ping(payload: Ping, ctx: Any) -> dict[str, str]:
        return {"account": payload.account}

    @feature.job("follow", on="skipwrite:write:ping", concurrency=Concurrency.skip(key=["account"]))
    def follow(payload: dict[str, Any], ctx: Any) -> None:
        time.sleep(0.3)

    stack = jobs_stack([feature])
    system = SessionUser.system("default")
    for _ in range(3):
        stack.service.dispatch_write("skipwrite:write:ping", {"account": "a"}, system)
    stack.drain()
    # The first ran; the two writes while it was pending or running enqueued nothing.
    assert len(job_rows(stack, "skipwrite:job:follow")) == 1
    assert len(job_runs(stack, "skipwrite:job:follow")) == 1


def test_replace_cancels_the_pending_rows_and_asks_the_running_one_to_stop(jobs_stack):
    feature = Feature("replacing")
    started = threading.Event()
    seen: list[tuple[int, bool]] = []

    @feature.job("render", manual=True, concurrency=Concurrency.replace())
    def render(payload: dict[str, Any], ctx: Any) -> None:
        if payload["n"] == 0:
            started.set()
            deadline = time.monotonic() + 10
            while not ctx.cancel_requested and time.monotonic() < deadline:
                time.sleep(0.02)
        seen.append((payload["n"], ctx.cancel_requested))

    stack = jobs_stack([feature])
    qn = "replacing:job:render"
    first = stack.app.jobs.run(qn, {"n": 0})
    assert started.wait(10)
    later = [stack.app.jobs.run(qn, {"n": n}, delay=0.5) for n in range(1, 6)]
    stack.drain()
    # The first ran to its end, told to stop; of the later ones only the last ran.
    assert sorted(seen) == [(0, True), (5, False)]
    states = {row.id: row.state for row in job_rows(stack, qn)}
    assert [states[row_id] for row_id in later] == ["cancelled"] * 4 + ["succeeded"]
    assert states[first] == "succeeded"


def test_sequential_runs_one_attempt_per_key_in_enqueue_order(jobs_stack):
    feature = Feature("queueing")
    spans = Intervals()

    @feature.job("apply", manual=True, concurrency=Concurrency.sequential(key=["account"]))
    def apply(payload: dict[str, Any], ctx: Any) -> None:
        assert ctx.attempt == 1
        spans.run(payload["account"], payload["n"], 0.15)

    stack = jobs_stack([feature])
    qn = "queueing:job:apply"
    for n in range(6):
        stack.app.jobs.run(qn, {"account": "a", "n": n})
    for n in range(3):
        stack.app.jobs.run(qn, {"account": "b", "n": n})
    summary = stack.drain(timeout=60)
    assert summary.succeeded == 9 and summary.retried == 0
    assert spans.most_at_once("a") == 1
    assert spans.most_at_once("b") == 1
    # The other key ran beside it, and each key in the order it was enqueued.
    assert overlap(spans.of("a"), spans.of("b"))
    for key in ("a", "b"):
        order = [n for k, n, *_ in sorted(spans.spans, key=lambda span: span[2]) if k == key]
        assert order == sorted(order)
    # Waiting spent no attempt.
    assert {run.attempt for run in job_runs(stack, qn)} == {1}


def test_max_per_tenant_runs_at_most_n_of_a_tenant_and_holds_no_other_back(jobs_stack):
    feature = Feature("quota")
    spans = Intervals()

    @feature.job("export", manual=True, max_per_tenant=2)
    def export(payload: dict[str, Any], ctx: Any) -> None:
        spans.run(ctx.tenant_id, payload, 0.2)

    stack = jobs_stack([feature])
    qn = "quota:job:export"
    for n in range(6):
        stack.app.jobs.run(qn, {"n": n}, user=SessionUser.system("t1"))
    stack.app.jobs.run(qn, {"n": 0}, user=SessionUser.system("t2"))
    summary = stack.drain(timeout=60)
    assert summary.succeeded == 7
    assert spans.most_at_once("t1") == 2
    assert overlap(spans.of("t1"), spans.of("t2"))


def test_debounce_runs_once_after_the_last_enqueue_with_its_payload(jobs_stack):
    feature = Feature("settling")
    runs: list[tuple[Any, float]] = []

    @feature.job("index", manual=True, concurrency=Concurrency.debounce(1.0, key=["doc"]))
    def index(payload: dict[str, Any], ctx: Any) -> None:
        runs.append((payload, time.monotonic()))

    stack = jobs_stack([feature])
    qn = "settling:job:index"
    ids = []
    for n in range(10):
        # Read before the call: the window opens at the enqueue's own clock reading,
        # which falls somewhere inside the call.
        last = time.monotonic()
        ids.append(stack.app.jobs.run(qn, {"doc": "d", "n": n}))
        time.sleep(0.05)
    stack.drain(timeout=30)
    assert len(set(ids)) == 1
    assert [payload for payload, _ in runs] == [{"doc": "d", "n": 9}]
    assert runs[0][1] - last >= 1.0
    assert len(job_rows(stack, qn)) == 1


def test_unique_for_returns_a_succeeded_row_within_the_period(jobs_stack):
    feature = Feature("once")
    calls: list[Any] = []

    @feature.job("welcome", manual=True, unique_for=3600, concurrency=None)
    def welcome(payload: dict[str, Any], ctx: Any) -> None:
        calls.append(payload)

    stack = jobs_stack([feature])
    qn = "once:job:welcome"
    first = stack.app.jobs.run(qn, {"user": "u1"})
    stack.drain()
    assert stack.app.jobs.run(qn, {"user": "u1"}) == first
    stack.drain()
    assert calls == [{"user": "u1"}]
    # The key is the job itself without key=, per tenant: another tenant is another key.
    other = stack.app.jobs.run(qn, {"user": "u1"}, user=SessionUser.system("t2"))
    assert other != first


def test_a_paused_job_waits_and_drain_names_it_until_resumed(jobs_stack):
    feature = Feature("pausing")
    calls: list[int] = []

    @feature.job("work", manual=True)
    def work(payload: dict[str, Any], ctx: Any) -> None:
        calls.append(payload["n"])

    stack = jobs_stack([feature])
    qn = "pausing:job:work"
    assert stack.app.jobs.pause(qn).changed
    for n in range(3):
        stack.app.jobs.run(qn, {"n": n})
    summary = stack.drain()
    assert calls == []
    assert summary.paused == {qn: 3}
    assert {row.state for row in job_rows(stack, qn)} == {"pending"}
    change = stack.app.jobs.resume(qn)
    assert change.changed
    summary = stack.drain(timeout=30)
    assert sorted(calls) == [0, 1, 2]
    assert summary.succeeded == 3 and summary.paused == {}


@pytest.mark.parametrize("database", ["postgres", "sqlite"])
def test_a_resume_leaves_rows_whose_time_has_not_come_to_their_time(asanoha_stack, database):
    feature = Feature("resuming")
    runs: list[Any] = []

    @feature.job("index", manual=True, concurrency=Concurrency.debounce(1.5, key=["doc"]))
    def index(payload: dict[str, Any], ctx: Any) -> None:
        runs.append((payload, time.monotonic()))

    @feature.job("later", manual=True)
    def later(payload: dict[str, Any], ctx: Any) -> None:
        runs.append(("later", time.monotonic()))

    stack = asanoha_stack(features=[feature], jobs=True, database=database)
    stack.app.jobs.pause("worker")
    debounced = stack.app.jobs.run("resuming:job:index", {"doc": "d", "n": 0})
    delayed = stack.app.jobs.run("resuming:job:later", {}, delay=3600)
    stack.app.jobs.resume("worker")
    # The relay's next pass: neither row is due yet, so neither reaches the broker.
    assert stack.service.relay_outbox() == 0
    rows = job_rows(stack)
    assert all(row.relay_after >= row.not_before for row in rows)
    assert [row.published_at for row in rows] == [None, None]
    # The debounce window is still open: the next enqueue collapses into the same row.
    last = time.monotonic()
    assert stack.app.jobs.run("resuming:job:index", {"doc": "d", "n": 1}) == debounced
    stack.app.jobs.cancel(delayed)
    stack.drain(timeout=30)
    assert [payload for payload, _ in runs] == [{"doc": "d", "n": 1}]
    assert runs[0][1] - last >= 1.5


def test_pausing_a_lane_pauses_its_jobs(jobs_stack):
    feature = Feature("lanes")
    calls: list[str] = []

    @feature.job("slow", manual=True)
    def slow(payload: dict[str, Any], ctx: Any) -> None:
        calls.append("slow")

    stack = jobs_stack([feature])
    assert stack.app.jobs.pause("worker").target == "lane:worker"
    stack.app.jobs.run("lanes:job:slow", {})
    assert stack.drain().paused == {"lanes:job:slow": 1}
    assert calls == []
    stack.app.jobs.resume("lane:worker")
    stack.drain(timeout=30)
    assert calls == ["slow"]
    with pytest.raises(LookupError, match="no job, workflow or lane"):
        stack.app.jobs.pause("lanes:job:nope")


def test_pausing_from_a_tenant_that_is_not_the_operators_is_refused(asanoha_stack):
    from asanoha.handlers import job_admin
    from asanoha.platform.errors import AccessDeniedError

    feature = Feature("guarded")

    @feature.job("work", manual=True)
    def work(payload: dict[str, Any], ctx: Any) -> None:
        pass

    stack = asanoha_stack([feature, job_admin.feature], settings={"operator_tenant": "ops"})
    admin = SessionUser.of("ops", "acme", ["SystemAdmin"])
    with stack.nothing_written(), pytest.raises(AccessDeniedError) as refused:
        stack.service.dispatch_write("job-admin:write:pause", {"target": "guarded:job:work"}, admin)
    assert refused.value.reason == "operator_required"
    operator = SessionUser.of("ops", "ops", ["SystemAdmin"])
    done = stack.service.dispatch_write(
        "job-admin:write:pause", {"target": "guarded:job:work"}, operator
    )
    assert done == {"target": "guarded:job:work", "paused": True, "changed": True, "woken": 0}
    pauses = stack.tables.job_pauses
    with stack.db.connect() as conn:
        assert conn.execute(select(pauses.c.target)).scalars().all() == ["guarded:job:work"]


def test_concurrency_settings_that_cannot_work_fail_at_definition():
    from asanoha.platform.errors import DefinitionError

    feature = Feature("bad")

    class Schema(BaseModel):
        account: str

    cases: list[tuple[Callable[[], Any], str]] = [
        (lambda: Concurrency.debounce(0), "window of seconds > 0"),
        (lambda: Concurrency.skip(key="account"), "list of payload field names"),
        (
            lambda: feature.job("a", manual=True, max_per_tenant=0),
            "bad:job:a: max_per_tenant= is how many",
        ),
        (
            lambda: feature.job("b", manual=True, concurrency="skip"),  # type: ignore[arg-type]
            "bad:job:b: concurrency= takes",
        ),
        (
            lambda: feature.job(
                "c", manual=True, schema=Schema, concurrency=Concurrency.skip(key=["acount"])
            ),
            "bad:job:c: the concurrency key names acount, which the job's schema lacks",
        ),
        (
            lambda: feature.job("d", cron="* * * * *", unique_for=60),
            "bad:job:d: unique_for= does not apply to a cron job",
        ),
        (
            lambda: feature.job("e", manual=True, unique_for=60, concurrency=Concurrency.skip()),
            "bad:job:e: unique_for= and Concurrency.skip",
        ),
    ]
    for define, message in cases:
        with pytest.raises(DefinitionError, match=message):
            define()


def test_a_delivery_of_a_row_whose_key_is_busy_waits_unpublished(jobs_stack):
    """A copy of a waiting row's message arriving while its key is busy leaves the row
    pending, unpublished and unclaimed, its attempt unspent."""
    feature = Feature("busy")
    release = threading.Event()
    started = threading.Event()

    @feature.job("hold", manual=True, concurrency=Concurrency.sequential())
    def hold(payload: dict[str, Any], ctx: Any) -> None:
        if payload["n"] == 0:
            started.set()
            release.wait(10)

    stack = jobs_stack([feature])
    qn = "busy:job:hold"
    stack.app.jobs.run(qn, {"n": 0})
    assert started.wait(10)
    second = stack.app.jobs.run(qn, {"n": 1})
    outbox = stack.tables.outbox
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with stack.db.connect() as conn:
            row = conn.execute(select(outbox).where(outbox.c.id == second)).one()
        if row.claim_token == "waiting":
            break
        time.sleep(0.05)
    assert (row.state, row.attempt, row.claim_token, row.published_at) == (
        "pending",
        0,
        "waiting",
        None,
    )
    release.set()
    summary = stack.drain(timeout=30)
    assert summary.succeeded == 2
    assert isinstance(second, uuid.UUID)


class Posting(BaseModel):
    account: str
    n: int


def test_sequential_holds_on_the_event_triggered_path(jobs_stack):
    feature = Feature("ledgerjobs")
    posted = feature.event("posted", Posting)
    spans = Intervals()

    @feature.write_handler("post", access=Access(roles=["system"]))
    def post(payload: Posting, ctx: Any) -> None:
        ctx.append_event(posted, payload.model_dump(), stream_id=payload.account)

    @feature.job(
        "book", on="ledgerjobs:event:posted", concurrency=Concurrency.sequential(key=["account"])
    )
    def book(payload: dict[str, Any], ctx: Any) -> None:
        spans.run(payload["account"], payload["n"], 0.1)

    stack = jobs_stack([feature])
    system = SessionUser.system("default")
    for n in range(5):
        stack.service.dispatch_write("ledgerjobs:write:post", {"account": "a", "n": n}, system)
    stack.drain(timeout=60)
    assert len(spans.of("a")) == 5
    assert spans.most_at_once("a") == 1


def test_skip_holds_on_the_cron_path(asanoha_stack):
    from asanoha.workers.cron_tasks import enqueue_cron_tick

    feature = Feature("cronskip")

    @feature.job("sweep", cron="* * * * *", concurrency=Concurrency.skip())
    def sweep(payload: dict[str, Any], ctx: Any) -> None:
        pass

    stack = asanoha_stack(features=[feature])
    app = stack.app
    first = enqueue_cron_tick(
        app.service, app.settings, "cronskip:job:sweep", "2026-05-04T12:00:00+00:00"
    )
    # The next tick while the first is still pending: nothing new.
    second = enqueue_cron_tick(
        app.service, app.settings, "cronskip:job:sweep", "2026-05-04T12:01:00+00:00"
    )
    assert first == second
    assert len(job_rows(stack, "cronskip:job:sweep")) == 1


def test_a_resume_between_a_paused_claim_and_its_park_does_not_leave_the_row_waiting(
    jobs_stack, monkeypatch
):
    """The resume runs after the delivery found the job paused and before it parked the
    row: the resume saw the row still published and left it, so the delivery claims once
    more and runs it, instead of leaving it for the relay's look ten seconds later."""
    feature = Feature("racing")
    ran: list[int] = []

    @feature.job("work", manual=True)
    def work(payload: dict[str, Any], ctx: Any) -> None:
        ran.append(payload["n"])

    stack = jobs_stack([feature])
    qn = "racing:job:work"
    rows = stack.app.celery_jobs.rows
    park = rows.park

    def park_after_a_resume(row_id: Any, row_attempt: int) -> None:
        stack.app.jobs.resume(qn)
        park(row_id, row_attempt)

    monkeypatch.setattr(rows, "park", park_after_a_resume)
    stack.app.jobs.pause(qn)
    stack.app.jobs.run(qn, {"n": 1})
    # Well inside the ten seconds a waiting row rests before the relay looks again.
    stack.drain(timeout=5)
    assert ran == [1]
