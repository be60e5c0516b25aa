"""Task outcomes seen by this process's worker: a wake-up for ``drain()`` and a count of the
tasks received but not finished (the broker cannot tell that on RabbitMQ)."""

from __future__ import annotations

import threading
from typing import Any

from celery import Celery, signals

_ATTRIBUTE = "asanoha_outcomes"


class JobOutcomes:
    """Fed by Celery signals of one Celery application."""

    def __init__(self, celery: Celery) -> None:
        self._celery = celery
        self._lock = threading.Lock()
        self._in_flight = 0
        #: Set whenever a task of this application finishes; ``drain()`` waits on it.
        self.changed = threading.Event()

    @property
    def in_flight(self) -> int:
        """Tasks received by this process's worker (ETA waits included) and not yet finished."""
        return self._in_flight

    def connect(self) -> None:
        """Start listening to the worker signals."""
        signals.task_received.connect(self._on_received, weak=False)
        signals.task_postrun.connect(self._on_postrun, weak=False)

    def disconnect(self) -> None:
        """Stop listening and forget the count (the worker is gone)."""
        signals.task_received.disconnect(self._on_received)
        signals.task_postrun.disconnect(self._on_postrun)
        with self._lock:
            self._in_flight = 0

    def _on_received(self, sender: Any = None, **_: Any) -> None:
        if getattr(sender, "app", None) is not self._celery:
            return
        with self._lock:
            self._in_flight += 1

    def _on_postrun(self, sender: Any = None, **_: Any) -> None:
        if getattr(sender, "app", None) is not self._celery:
            return
        with self._lock:
            self._in_flight = max(0, self._in_flight - 1)
        self.changed.set()
