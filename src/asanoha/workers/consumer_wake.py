"""Waking consumers after commits: one coalesced Celery task, never a NOTIFY.

``NOTIFY`` inside a write transaction takes a server-wide lock at commit (measured here:
10.4k -> 3.4k transactions/s). Instead, after a commit that appended events some consumer
follows, the writing process publishes the advance task, at most once per ``WAKE_INTERVAL``:
a burst of 1,000 writes publishes a handful of tasks, and none of them from the writer's
thread. The task advances every consumer; a second one running at the same time skips the
cursors the first holds (``FOR UPDATE SKIP LOCKED``).

A partitioned consumer's partitions are spread over the fleet: the task publishes one task
per further partition (``advance(name, partition)``), which other workers take while it
delivers the first; each partition's cursor is locked on its own, so they run in parallel
and a partition another process holds is skipped.

A cursor the task found held by someone else (a pass whose scan came before the event that
woke it, an operator's command) gets a follow-up task shortly after. Without the workers'
tick (``ASANOHA_CONSUMER_TICK_INTERVAL=0``) the task is the only driver, so a consumer
waiting for its next attempt at a failing event gets one too, when it is due.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import threading
import time
from collections.abc import Callable

from celery import Celery, Task

from asanoha.platform.consumers import Consumers, Round
from asanoha.platform.settings import Settings
from asanoha.workers.lanes import queue_name

ADVANCE_TASK_NAME = "asanoha.advance-consumers"
#: Seconds between two wake-ups published by one process; wakes meanwhile are merged.
WAKE_INTERVAL = 0.05
#: Seconds an advance task may wait in the queue before it is dropped: a later wake-up or
#: the tick does the same work.
ADVANCE_EXPIRES = 60.0
#: Seconds before a follow-up tries a cursor that was held by someone else (a pass is
#: short: the holder is most likely done by then).
BUSY_FOLLOW_UP = 0.2

log = logging.getLogger("asanoha.consumers")


def register_advance_task(celery: Celery, consumers: Consumers, settings: Settings) -> Task:
    """The task that advances every consumer until it has caught up (and, without the
    workers' tick, schedules its own follow-ups)."""
    follow_ups = FollowUps(lambda delay: publish_advance(celery, settings, countdown=delay))
    ticking = settings.consumer_tick_interval > 0

    @celery.task(name=ADVANCE_TASK_NAME, ignore_result=True, shared=False)  # type: ignore[untyped-decorator]
    def advance_consumers(name: str | None = None, partition: int | None = None) -> int:
        if name is not None:
            result = consumers.run_partition(name, partition or 0)
            round_ = Round(result.delivered, (name,) if result.busy else (), result.retry_at)
        else:
            spread_partitions(
                consumers, lambda qn, part: publish_advance(celery, settings, key=(qn, part))
            )
            round_ = consumers.run()
        delay = follow_up_delay(round_, settings.broker_countdown_max, ticking=ticking)
        if delay is not None:
            follow_ups.want(delay)
        return round_.delivered

    task: Task = advance_consumers
    return task


def spread_partitions(consumers: Consumers, send: Callable[[str, int], None]) -> None:
    """Publish an advance task for every partition but the first of each partitioned
    consumer, so that other workers take them."""
    for name in consumers.names:
        for partition in range(1, consumers.partitions(name)):
            try:
                send(name, partition)
            except Exception:
                # This task delivers them too, one after the other.
                log.warning("publishing a partition's advance task failed", exc_info=True)
                return


def follow_up_delay(round_: Round, longest: float, *, ticking: bool = False) -> float | None:
    """Seconds until the next advance ``round_`` asks for, at most ``longest`` (a longer
    wait is a chain of follow-ups, so the broker never holds a long countdown); ``None``:
    none needed.

    A cursor held by another pass gets one in every mode: that pass may have scanned before
    the event that woke this task, and stops once it read less than a batch, so without a
    follow-up the event would wait for the workers' tick. With the tick, a failing event's
    next attempt is the tick's to run."""
    delays: list[float] = []
    if round_.busy:
        delays.append(BUSY_FOLLOW_UP)
    if round_.next_attempt_at is not None and not ticking:
        due = (round_.next_attempt_at - dt.datetime.now(dt.UTC)).total_seconds()
        delays.append(max(0.0, due))
    return min(min(delays), longest) if delays else None


class FollowUps:
    """The follow-up advance tasks one process has scheduled: a need that one already
    scheduled covers (it runs earlier and asks again) schedules nothing."""

    #: Seconds by which a scheduled follow-up may come after the one wanted and still do.
    SLACK = 0.05

    def __init__(self, send: Callable[[float], None]) -> None:
        self._send = send
        self._due: float | None = None
        self._lock = threading.Lock()

    def want(self, delay: float) -> None:
        """Have an advance task run in ``delay`` seconds, unless one is due by then."""
        now = time.monotonic()
        with self._lock:
            if self._due is not None and now < self._due <= now + delay + self.SLACK:
                return
            self._due = now + delay
        try:
            self._send(delay)
        except Exception:
            with self._lock:
                self._due = None
            log.warning("scheduling a consumer follow-up failed", exc_info=True)


def publish_advance(
    celery: Celery,
    settings: Settings,
    *,
    countdown: float = 0.0,
    key: tuple[str, int] | None = None,
) -> None:
    """Send one advance task to the worker lane (in ``countdown`` seconds): of every
    consumer, or of the partition ``key`` (consumer name, partition) only."""
    celery.send_task(
        ADVANCE_TASK_NAME,
        args=key or (),
        queue=queue_name(settings.queue_prefix, "worker"),
        countdown=countdown or None,
        expires=countdown + ADVANCE_EXPIRES,
    )


class ConsumerWaker:
    """Publishes wake-ups from a background thread, coalesced to one per interval."""

    def __init__(self, send: Callable[[], None], *, interval: float = WAKE_INTERVAL) -> None:
        self._send = send
        self._interval = interval
        self._wanted = threading.Event()
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._pid = 0

    def wake(self) -> None:
        """Ask for a wake-up; returns at once."""
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
            try:
                self._send()
            except Exception:
                log.warning(
                    "publishing the consumer wake-up failed; the tick covers it", exc_info=True
                )
            # Wake-ups asked for meanwhile are merged into the next publish.
            self._stopped.wait(self._interval)
