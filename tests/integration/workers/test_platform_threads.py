"""The platform's tasks (consumer wake-ups, cron ticks) run on threads of the worker's own: a
pool busy with jobs neither holds them back nor lends them a slot."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

from celery.signals import task_prerun
from pydantic import BaseModel

from asanoha import Access, Feature
from asanoha.platform.consumers import ConsumerContext
from asanoha.platform.store import StoredEvent
from asanoha.testing import TestUsers
from asanoha.workers.beat import CRON_TASK_NAME
from asanoha.workers.consumer_wake import ADVANCE_TASK_NAME
from asanoha.workers.lanes import platform_queue
from asanoha.workers.runtime import CONCURRENCY
from tests.integration.workers.conftest import job_rows

#: Seconds a test waits for the background driver (a bound, not a measurement).
WAIT = 20


class Ring(BaseModel):
    n: int


class Busy:
    """Jobs that hold their pool slot until released."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.running = threading.Semaphore(0)

    def hold(self) -> None:
        self.running.release()
        assert self.release.wait(WAIT * 2), "the test never released its jobs"


def _feature(busy: Busy, seen: threading.Event) -> Feature:
    feature = Feature("busy")
    feature.event("rang", None)

    @feature.write_handler("ring", access=Access(roles=["Admin"]))
    def ring(payload: Ring, ctx: Any) -> None:
        ctx.append_event("busy:event:rang", {"n": payload.n}, stream_id=str(uuid.uuid4()))

    @feature.consumer("listen", on=["busy:event:rang"])
    def listen(event: StoredEvent, ctx: ConsumerContext) -> None:
        seen.set()

    @feature.job("hold", manual=True)
    def hold(payload: dict[str, Any], ctx: Any) -> None:
        busy.hold()

    @feature.job("tick", cron="*/5 * * * *")
    def tick(payload: dict[str, Any], ctx: Any) -> None:
        return None

    return feature


def _ran_on(names: list[str], task: str) -> Any:
    def on_prerun(sender: Any = None, **_: Any) -> None:
        if getattr(sender, "name", None) == task:
            names.append(threading.current_thread().name)

    return on_prerun


def _fill_the_pool(stack: Any, busy: Busy) -> None:
    for _ in range(CONCURRENCY):
        stack.dispatch_job("busy:job:hold", {})
    for _ in range(CONCURRENCY):
        assert busy.running.acquire(timeout=WAIT), "the jobs never started"


def test_a_wake_up_runs_while_every_pool_slot_holds_a_job(jobs_stack):
    # Without the tick, only the wake-up task delivers the event. Every slot of the worker's
    # pool runs a job that waits for the test: a wake-up taken by the pool (and counted in
    # its prefetch of one message per slot) would wait for them.
    busy, seen = Busy(), threading.Event()
    stack = jobs_stack([_feature(busy, seen)], consumer_wake=True, consumer_tick_interval=0)
    threads: list[str] = []
    on_prerun = _ran_on(threads, ADVANCE_TASK_NAME)
    task_prerun.connect(on_prerun, weak=False)
    try:
        _fill_the_pool(stack, busy)
        stack.http.write_ok("busy:write:ring", {"n": 1}, TestUsers.admin)
        assert seen.wait(WAIT), "the wake-up waited for the jobs"
        assert not busy.release.is_set()
        assert threads and all(name.startswith("asanoha-consumer-wake") for name in threads)
    finally:
        busy.release.set()
        task_prerun.disconnect(on_prerun)
    stack.drain(timeout=WAIT)


def test_a_cron_tick_enqueues_its_job_while_every_pool_slot_holds_a_job(jobs_stack):
    busy = Busy()
    stack = jobs_stack([_feature(busy, threading.Event())])
    threads: list[str] = []
    on_prerun = _ran_on(threads, CRON_TASK_NAME)
    task_prerun.connect(on_prerun, weak=False)
    try:
        _fill_the_pool(stack, busy)
        # As beat sends it: to the cron queue.
        stack.app.celery.send_task(
            CRON_TASK_NAME,
            args=["busy:job:tick", "2026-05-04T12:00:00+00:00"],
            queue=platform_queue(stack.app.settings, "cron"),
        )
        deadline = time.monotonic() + WAIT
        while not [row for row in job_rows(stack) if row.job_qn == "busy:job:tick"]:
            assert time.monotonic() < deadline, "the tick waited for the jobs"
            time.sleep(0.05)
        assert not busy.release.is_set()
        assert threads == ["asanoha-cron_0"]
    finally:
        busy.release.set()
        task_prerun.disconnect(on_prerun)
    stack.drain(timeout=WAIT)
    ticked = [row for row in job_rows(stack) if row.job_qn == "busy:job:tick"]
    assert [row.state for row in ticked] == ["succeeded"]
