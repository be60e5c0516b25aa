"""Task outcomes seen by this process's worker: a wake-up for ``drain()`` and a count of the
deliveries received but not finished (the broker cannot tell that on RabbitMQ).

A received delivery ends in one of three signals: ``task_postrun`` when its trace ran (success,
failure, retry and ``Ignore`` alike), ``task_revoked`` when the worker dropped it unrun (an
``expires`` that passed while it waited for its ETA or a pool slot, a revoked id), and
``task_internal_error`` when the trace itself broke before the task's body (no postrun then).
Counting only the first would leave a dropped delivery in flight for ever and ``drain()``
waiting on it."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

from celery import Celery, signals


class JobOutcomes:
    """Fed by Celery signals of one Celery application."""

    def __init__(self, celery: Celery) -> None:
        self._celery = celery
        self._lock = threading.Lock()
        # Deliveries by task id: every delivery of a job row carries the row's id, so one id
        # may be in flight more than once (a retry's message received before the last ended).
        self._received: Counter[str] = Counter()
        #: Set whenever a task of this application finishes; ``drain()`` waits on it.
        self.changed = threading.Event()

    @property
    def in_flight(self) -> int:
        """Deliveries received by this process's worker (ETA waits included) and not yet
        finished."""
        with self._lock:
            return sum(self._received.values())

    def connect(self) -> None:
        """Start listening to the worker signals."""
        signals.task_received.connect(self._on_received, weak=False)
        signals.task_postrun.connect(self._on_postrun, weak=False)
        signals.task_revoked.connect(self._on_revoked, weak=False)
        signals.task_internal_error.connect(self._on_postrun, weak=False)

    def disconnect(self) -> None:
        """Stop listening and forget the count (the worker is gone)."""
        signals.task_received.disconnect(self._on_received)
        signals.task_postrun.disconnect(self._on_postrun)
        signals.task_revoked.disconnect(self._on_revoked)
        signals.task_internal_error.disconnect(self._on_postrun)
        with self._lock:
            self._received.clear()

    def _on_received(self, sender: Any = None, request: Any = None, **_: Any) -> None:
        if getattr(sender, "app", None) is not self._celery or request is None:
            return
        with self._lock:
            self._received[request.id] += 1

    def _on_postrun(self, sender: Any = None, task_id: str | None = None, **_: Any) -> None:
        self._ended(sender, task_id)

    def _on_revoked(self, sender: Any = None, request: Any = None, **_: Any) -> None:
        self._ended(sender, getattr(request, "id", None))

    def _ended(self, task: Any, task_id: str | None) -> None:
        if getattr(task, "app", None) is not self._celery:
            return
        if task_id is not None:
            with self._lock:
                self._received[task_id] -= 1
                if self._received[task_id] <= 0:
                    del self._received[task_id]
        self.changed.set()
