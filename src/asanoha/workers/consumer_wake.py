"""Waking consumers after commits: one coalesced Celery task, never a NOTIFY.

``NOTIFY`` inside a write transaction takes a server-wide lock at commit (measured here:
10.4k -> 3.4k transactions/s). Instead, after a commit that appended events some consumer
follows, the writing process publishes the advance task, at most once per ``WAKE_INTERVAL``:
a burst of 1,000 writes publishes a handful of tasks, and none of them from the writer's
thread. The task advances every consumer; a second one running at the same time skips the
cursors the first holds (``FOR UPDATE SKIP LOCKED``).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable

from celery import Celery, Task

from asanoha.platform.consumers import Consumers
from asanoha.platform.settings import Settings
from asanoha.workers.lanes import queue_name

ADVANCE_TASK_NAME = "asanoha.advance-consumers"
#: Seconds between two wake-ups published by one process; wakes meanwhile are merged.
WAKE_INTERVAL = 0.05
#: Seconds an advance task may wait in the queue before it is dropped: a later wake-up or
#: the tick does the same work.
ADVANCE_EXPIRES = 60.0

log = logging.getLogger("asanoha.consumers")


def register_advance_task(celery: Celery, consumers: Consumers) -> Task:
    """The task that advances every consumer until it has caught up."""

    @celery.task(name=ADVANCE_TASK_NAME, ignore_result=True, shared=False)  # type: ignore[untyped-decorator]
    def advance_consumers() -> int:
        return consumers.run_once()

    task: Task = advance_consumers
    return task


def publish_advance(celery: Celery, settings: Settings) -> None:
    """Send one advance task to the worker lane."""
    celery.send_task(
        ADVANCE_TASK_NAME,
        queue=queue_name(settings.queue_prefix, "worker"),
        expires=ADVANCE_EXPIRES,
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
