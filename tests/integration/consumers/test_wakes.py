"""Consumer wake-ups after commits: a burst of writes publishes a few tasks per partition, not
one per write; they go to the consumers queue, never to a job lane; every event is still
delivered once, in order per stream."""

from __future__ import annotations

import math
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pytest
from celery.signals import before_task_publish, task_prerun

from asanoha import Feature
from asanoha.platform.store.events import partition_key
from asanoha.testing import TestUsers
from asanoha.workers.consumer_wake import ADVANCE_TASK_NAME, ROUND_BUDGET
from tests.integration.consumers.conftest import Recorder, ledger

PARTITIONS = 4
WRITES = 200
#: Wake-up tasks a burst may publish per partition besides its hand-overs (one every
#: ``ROUND_BUDGET`` seconds of rounds, so their number follows how long the burst takes on
#: the machine): the first, and follow-ups of a cursor the drain held.
TASKS_PER_PARTITION = 6
NAME = "ledger:consumer:follow"
#: The wake-up tasks are the only driver besides ``drain()``.
LIVE = {"consumer_wake": True, "consumer_tick_interval": 0}
#: Seconds a test waits for the wake-up tasks to deliver (a bound, not a measurement).
WAIT = 30


class Counted(Recorder):
    """A recorder that tells when it has seen ``expected`` events."""

    def __init__(self, expected: int) -> None:
        super().__init__()
        self.expected = expected
        self.complete = threading.Event()

    def __call__(self, event: Any, ctx: Any) -> None:
        super().__call__(event, ctx)
        if len(self.ids) >= self.expected:
            self.complete.set()


class Published:
    """The routing key of every task the process publishes while it is active."""

    def __init__(self) -> None:
        self.tasks: list[tuple[str, str]] = []
        self.args: list[tuple[str, tuple[Any, ...]]] = []
        #: Wake-up tasks published and not yet started, and the most there ever were.
        self.waiting = 0
        self.most_waiting = 0
        self._lock = threading.Lock()

    def __call__(
        self, sender: Any = None, routing_key: str = "", body: Any = None, **_: Any
    ) -> None:
        with self._lock:
            self.tasks.append((str(sender), routing_key))
            self.args.append((str(sender), tuple(body[0]) if body else ()))
            if str(sender) == ADVANCE_TASK_NAME:
                self.waiting += 1
                self.most_waiting = max(self.most_waiting, self.waiting)

    def started(self, sender: Any = None, **_: Any) -> None:
        """A task started in this process's worker (``task_prerun``)."""
        if getattr(sender, "name", None) == ADVANCE_TASK_NAME:
            with self._lock:
                self.waiting -= 1

    def partitions_woken(self, name: str) -> set[int]:
        """The partitions of the consumer ``name`` whose wake-up tasks were published."""
        with self._lock:
            return {
                args[1] for task, args in self.args if task == ADVANCE_TASK_NAME and args[0] == name
            }

    def of(self, task: str, prefix: str) -> list[str]:
        """The routing keys of the ``task`` messages sent to ``prefix``'s queues."""
        with self._lock:
            return [key for name, key in self.tasks if name == task and key.startswith(prefix)]


@pytest.fixture
def published() -> Iterator[Published]:
    record = Published()
    before_task_publish.connect(record, weak=False)
    task_prerun.connect(record.started, weak=False)
    try:
        yield record
    finally:
        before_task_publish.disconnect(record)
        task_prerun.disconnect(record.started)


def _write_burst(stack: Any, writes: int = WRITES) -> list[int]:
    """``writes`` posts over 20 streams through the write path; their event ids."""
    return [
        int(
            stack.service.dispatch_write(
                "ledger:write:post", {"stream": f"s{n % 20}", "n": n}, TestUsers.admin
            )
        )
        for n in range(writes)
    ]


def _delivered_once_in_order(recorder: Recorder, ids: list[int]) -> None:
    assert sorted(recorder.ids) == sorted(ids)
    by_stream: dict[str, list[int]] = defaultdict(list)
    for event in recorder.events:
        by_stream[event.stream_id].append(event.version)
    for versions in by_stream.values():
        assert versions == sorted(versions)


def test_a_burst_of_writes_publishes_a_few_wake_up_tasks_per_partition(consumer_stack, published):
    recorder = Counted(WRITES)
    stack = consumer_stack([ledger(recorder, partitions=PARTITIONS)], jobs=True, settings=LIVE)
    prefix = stack.app.settings.queue_prefix
    began = time.monotonic()
    ids = _write_burst(stack)
    # The wake-up tasks alone deliver the burst.
    assert recorder.complete.wait(WAIT)
    took = time.monotonic() - began
    stack.drain(timeout=60)

    wakes = published.of(ADVANCE_TASK_NAME, prefix)
    # Never more waiting in the broker than there are partitions, however fast the writes.
    assert published.most_waiting <= PARTITIONS, published.most_waiting
    # A few per partition, not one per write: how many hand-overs follows the burst's time.
    hand_overs = math.ceil(took / ROUND_BUDGET)
    assert 1 <= len(wakes) <= PARTITIONS * (TASKS_PER_PARTITION + hand_overs) < WRITES, (
        len(wakes),
        took,
    )
    _delivered_once_in_order(recorder, ids)


def test_a_write_wakes_only_the_partition_its_stream_goes_to(consumer_stack, published):
    recorder = Counted(3)
    stack = consumer_stack([ledger(recorder, partitions=PARTITIONS)], jobs=True, settings=LIVE)
    streams = [f"s{n}" for n in range(20)]
    owner = {stream: partition_key(TestUsers.admin.tenant_id, stream) % PARTITIONS
             for stream in streams}  # fmt: skip
    # Two streams of one partition, one of another.
    first, second = streams[0], next(s for s in streams[1:] if owner[s] == owner[streams[0]])
    other = next(s for s in streams if owner[s] != owner[first])
    for n, stream in enumerate([first, second, other]):
        stack.service.dispatch_write(
            "ledger:write:post", {"stream": stream, "n": n}, TestUsers.admin
        )
    # The wake-up tasks alone deliver them.
    assert recorder.complete.wait(WAIT)
    stack.drain(timeout=60)
    assert published.partitions_woken(NAME) == {owner[first], owner[other]}
    assert sorted(event.stream_id for event in recorder.events) == sorted([first, second, other])


def _with_a_job(recorder: Recorder, ran: threading.Event) -> Feature:
    feature = ledger(recorder, partitions=PARTITIONS)

    @feature.job("report", manual=True)
    def report(payload: dict[str, Any], ctx: Any) -> None:
        ran.set()

    return feature


def test_wake_up_tasks_go_to_the_consumers_queue_and_never_to_a_job_lane(consumer_stack, published):
    ran = threading.Event()
    recorder = Counted(100)
    stack = consumer_stack([_with_a_job(recorder, ran)], jobs=True, settings=LIVE)
    prefix = stack.app.settings.queue_prefix
    _write_burst(stack, 50)
    stack.dispatch_job("ledger:job:report", {})
    _write_burst(stack, 50)
    # The wake-up tasks alone deliver the burst.
    assert recorder.complete.wait(WAIT)
    stack.drain(timeout=60)

    assert ran.is_set()
    wakes = published.of(ADVANCE_TASK_NAME, prefix)
    assert wakes and set(wakes) == {f"{prefix}.consumers"}
    jobs = published.of("ledger:job:report", prefix)
    assert jobs == [f"{prefix}.worker"]
    # The job lane holds jobs only: a job waits behind other jobs, never behind wake-ups.
    on_the_lane = {name for name, key in published.tasks if key == f"{prefix}.worker"}
    assert on_the_lane == {"ledger:job:report"}
