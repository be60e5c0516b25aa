"""Waking consumers after commits: at most one wake-up task per consumer partition, never a
NOTIFY.

``NOTIFY`` inside a write transaction takes a server-wide lock at commit (measured here:
10.4k -> 3.4k transactions/s). Instead, after a commit that appended events some consumer
follows, the writing process arms a wake-up of every partition of those consumers, from a
background thread (never the writer's). A partition has at most one wake-up task, pending
or running, at any time: it is a row in ``asanoha_consumer_wakes`` (``platform/consumers/
wakes.py`` keeps the rows and explains the race), and a write that finds the row sets its
``again`` flag instead of publishing. So the consumers queue never holds more tasks than
there are consumer partitions, however fast the writes come, and a burst of writes costs
a few tasks per partition: the task runs round after round while writes keep setting
``again``.

Each task advances its own partition (``Consumers.run_partition``), so the partitions of a
consumer are delivered side by side by the workers that take their tasks. A task hands its
partition to a follow-up task at the back of the queue after ``ROUND_BUDGET`` seconds of
rounds, so a partition whose writers never pause does not keep a wake-up thread to itself.

The tasks go to the consumers queue (``lanes.platform_queue``), never to a job lane: a job
does not wait behind them, and the lane length a scaler reads counts jobs only. A worker
runs them on a few threads of its main process, never in its job pool (``platform_threads``).

After a round, a partition whose cursor another process held (a pass whose scan may have
come before the event, an operator's command) gets a follow-up task shortly after, in the
same row. One stopped at a failing event keeps its row until its next attempt is due: the
workers' tick tries it then, or, without the tick (``ASANOHA_CONSUMER_TICK_INTERVAL=0``), a
follow-up task. A dead or disabled partition keeps its row for ``STOPPED_HOLD`` seconds, so
writes to it do not publish a task each; after an operator's restart or enable, the tick
(or, without it, a write after that hold) delivers it.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from celery import Celery, Task

from asanoha.platform.consumers import Consumers, PassResult, Wake
from asanoha.platform.settings import Settings
from asanoha.workers.lanes import platform_queue

ADVANCE_TASK_NAME = "asanoha.advance-consumers"
#: Seconds between two wake-up requests of one process (each is a few statements on the
#: wake rows); requests meanwhile are merged. Not what bounds the tasks: the rows do.
WAKE_INTERVAL = 0.05
#: Seconds a wake-up task may wait in the queue before the worker drops it; its row is
#: taken as lost after as long, and the next write arms a new task.
ADVANCE_EXPIRES = 60.0
#: Seconds before a follow-up tries a cursor that was held by someone else (a pass is
#: short: the holder is most likely done by then).
BUSY_FOLLOW_UP = 0.2
#: Seconds of rounds one task runs before it hands its partition to a follow-up task.
ROUND_BUDGET = 2.0
#: Seconds a task waits after a round before it looks for writes that came meanwhile: the
#: writes of a burst share rounds (and tasks) instead of each ending one and arming the next.
#: Longer than ``WAKE_INTERVAL``, so a process that keeps writing always sets ``again`` in it.
LINGER = 0.1
#: Seconds a dead or disabled partition keeps its row (writes publish no task meanwhile).
STOPPED_HOLD = 60.0

log = logging.getLogger("asanoha.consumers")


@dataclass(frozen=True)
class NextStep:
    """What a wake-up task does after a round (``next_step``)."""

    #: ``end``: end the round (another one if a write came meanwhile); ``follow_up``: keep
    #: the row and publish a task of the same token in ``delay`` seconds; ``hold``: keep the
    #: row for ``delay`` seconds without a task.
    kind: Literal["end", "follow_up", "hold"]
    delay: float = 0.0


def next_step(
    result: PassResult, *, ticking: bool, longest: float, now: dt.datetime | None = None
) -> NextStep:
    """What follows a round that ended with ``result``; a follow-up comes within
    ``longest`` seconds at most (a longer wait is a chain of follow-ups, so the broker
    never holds a long countdown).

    A cursor held by another pass gets a follow-up in every mode: that pass may have scanned
    before the event that woke this task, and stops once it read less than a batch, so
    without one the event would wait for the tick or the next write. With the tick, a
    failing event's next attempt is the tick's to run."""
    if result.busy:
        return NextStep("follow_up", min(BUSY_FOLLOW_UP, longest))
    if result.retry_at is not None:
        due = (result.retry_at - (now or dt.datetime.now(dt.UTC))).total_seconds()
        due = max(0.0, due)
        if ticking:
            return NextStep("hold", due)
        return NextStep("follow_up", min(due, longest))
    if result.stopped:
        return NextStep("hold", STOPPED_HOLD)
    return NextStep("end")


class ConsumerWakes:
    """Arms consumer wake-ups, publishes their tasks and runs the tasks' rounds."""

    def __init__(self, celery: Celery, consumers: Consumers, settings: Settings) -> None:
        self._celery = celery
        self._consumers = consumers
        self._queue = platform_queue(settings, "consumers")
        self._ticking = settings.consumer_tick_interval > 0
        self._longest = settings.broker_countdown_max

    def request(
        self,
        names: Sequence[str] | None = None,
        keys: Mapping[str, Collection[int]] | None = None,
    ) -> int:
        """Wake every partition of ``names`` (every consumer by default; for a name in
        ``keys``, the partitions owning those partition keys) that has no wake-up pending or
        running; return how many tasks were published."""
        published = 0
        armed = self._consumers.arm_wakes(names, until=_after(ADVANCE_EXPIRES), keys=keys)
        for wake in armed:
            if self._publish(wake, 0.0):
                published += 1
        return published

    def run(self, wake: Wake) -> int:
        """The task of ``wake``: rounds over its partition until no write came during the
        last one; return how many events were delivered."""
        if not self._consumers.begin_wake(wake, _after(ADVANCE_EXPIRES)):
            return 0
        try:
            return self._rounds(wake)
        except Exception:
            # The next write arms a new task at once, instead of after the row's time.
            try:
                self._consumers.drop_wake(wake)
            except Exception:
                log.warning("forgetting the failed wake-up failed", exc_info=True)
            raise

    def _rounds(self, wake: Wake) -> int:
        deadline = time.monotonic() + ROUND_BUDGET
        delivered = 0
        while True:
            result = self._consumers.run_partition(wake.name, wake.partition)
            delivered += result.delivered
            step = next_step(result, ticking=self._ticking, longest=self._longest)
            if step.kind == "follow_up":
                self._follow_up(wake, step.delay)
                return delivered
            if step.kind == "hold":
                self._consumers.hold_wake(wake, _after(step.delay))
                return delivered
            # Writes of a burst that come meanwhile join the next round instead of waiting
            # for a task of their own.
            time.sleep(max(0.0, min(LINGER, deadline - time.monotonic())))
            if not self._consumers.end_wake_round(wake, _after(ADVANCE_EXPIRES)):
                return delivered
            if time.monotonic() >= deadline:
                self._follow_up(wake, 0.0)
                return delivered

    def _follow_up(self, wake: Wake, delay: float) -> None:
        if self._consumers.hold_wake(wake, _after(delay + ADVANCE_EXPIRES)):
            self._publish(wake, delay)

    def _publish(self, wake: Wake, countdown: float) -> bool:
        """Send ``wake``'s task to the consumers queue (in ``countdown`` seconds); when that
        fails, forget its row so that the next write arms a new one."""
        try:
            self._celery.send_task(
                ADVANCE_TASK_NAME,
                args=(wake.name, wake.partition, wake.token),
                queue=self._queue,
                countdown=countdown or None,
                expires=countdown + ADVANCE_EXPIRES,
            )
        except Exception:
            log.warning("publishing a consumer wake-up failed; the tick covers it", exc_info=True)
            try:
                self._consumers.drop_wake(wake)
            except Exception:
                log.warning("forgetting the unpublished wake-up failed", exc_info=True)
            return False
        return True


def register_advance_task(celery: Celery, wakes: ConsumerWakes) -> Task:
    """The task that runs one consumer partition's wake-up (``ConsumerWakes.run``)."""

    @celery.task(name=ADVANCE_TASK_NAME, ignore_result=True, shared=False)  # type: ignore[untyped-decorator]
    def advance_consumers(
        name: str | None = None, partition: int | None = None, token: str | None = None
    ) -> int:
        if name is None or token is None:
            # A message of an earlier release (no partition's wake-up): wake them all.
            wakes.request()
            return 0
        return wakes.run(Wake(name, partition or 0, token))

    task: Task = advance_consumers
    return task


def _after(seconds: float) -> dt.datetime:
    return dt.datetime.now(dt.UTC) + dt.timedelta(seconds=seconds)


class ConsumerWaker:
    """Requests wake-ups from a background thread, merging those asked for meanwhile.

    ``send(names, keys)`` asks for them: ``keys`` holds, for a name asked for with the
    partition keys of a write's events, the keys of every such request merged (a name asked
    for without keys wakes every partition of it)."""

    def __init__(
        self,
        send: Callable[[tuple[str, ...], Mapping[str, frozenset[int]]], object],
        *,
        interval: float = WAKE_INTERVAL,
    ) -> None:
        self._send = send
        self._interval = interval
        self._names: set[str] = set()
        self._keys: dict[str, set[int]] = {}
        self._every: set[str] = set()
        self._wanted = threading.Event()
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._pid = 0

    def wake(self, names: Iterable[str], keys: Mapping[str, Iterable[int]] | None = None) -> None:
        """Ask for a wake-up of the consumers ``names`` (of the partitions owning
        ``keys[name]`` for a name in ``keys``); returns at once."""
        with self._lock:
            for name in names:
                self._names.add(name)
                if keys is not None and name in keys:
                    self._keys.setdefault(name, set()).update(keys[name])
                else:
                    self._every.add(name)
        self._wanted.set()
        thread = self._thread
        # A forked child (prefork pool, uvicorn workers) inherits no threads: start its own.
        if thread is None or self._pid != os.getpid() or not thread.is_alive():
            with self._lock:
                if self._thread is None or self._pid != os.getpid() or not self._thread.is_alive():
                    self._pid = os.getpid()
                    self._thread = threading.Thread(
                        target=self._run, name="asanoha-consumer-wake", daemon=True
                    )
                    self._thread.start()

    def close(self) -> None:
        """Stop the thread (a pending wake-up is dropped; the tick covers it)."""
        self._stopped.set()
        self._wanted.set()
        thread = self._thread
        if thread is not None and thread.is_alive() and self._pid == os.getpid():
            thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stopped.is_set():
            self._wanted.wait()
            if self._stopped.is_set():
                return
            self._wanted.clear()
            with self._lock:
                names = tuple(sorted(self._names))
                keys = {
                    name: frozenset(held)
                    for name, held in self._keys.items()
                    if name not in self._every
                }
                self._names.clear()
                self._keys.clear()
                self._every.clear()
            try:
                self._send(names, keys)
            except Exception:
                log.warning("requesting the consumer wake-up failed; the tick covers it",
                            exc_info=True)  # fmt: skip
            # Requests meanwhile are merged into the next one.
            self._stopped.wait(self._interval)
