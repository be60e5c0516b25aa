"""The peer of ``bench/workflows.py``: Celery's own ``chord`` on a bare Celery app with a Redis
result backend, configured from the environment (``BENCH_BROKER_URL``, ``BENCH_BACKEND_URL``,
``BENCH_QUEUE``) with asanoha's delivery settings (late acks, prefetch 1, task events).

Its result keys (the members' results and the chord's counter) are under the queue's name,
so that a run deletes exactly what it wrote."""

from __future__ import annotations

import os

from celery import Celery

from _stamps import stamp_task_ends, stamp_task_starts

#: A member of the chord: the first one's start is the start of a run.
MEMBER = "bench.chord.noop"
#: The chord's body: its end is the end of a run.
BODY = "bench.chord.done"


def make_app(broker_url: str, backend_url: str, queue: str) -> Celery:
    """A Celery app sending to and consuming ``queue``, its results in ``backend_url``."""
    app = Celery("bench_chord", broker=broker_url, backend=backend_url, set_as_current=False)
    app.conf.update(
        task_default_queue=queue,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        worker_send_task_events=True,
        task_send_sent_event=True,
        broker_connection_retry_on_startup=True,
        result_backend_transport_options={"global_keyprefix": f"{queue}."},
    )
    app.task(name=MEMBER)(_noop)
    app.task(name=BODY)(_done)
    return app


def _noop() -> None:
    """Does nothing: a member of the chord (its result is stored, as a chord needs)."""
    return None


def _done(results: list[None]) -> None:
    """Does nothing with the members' results: the chord's body."""
    return None


app = make_app(
    os.environ.get("BENCH_BROKER_URL", "redis://127.0.0.1:6379/0"),
    os.environ.get("BENCH_BACKEND_URL", "redis://127.0.0.1:6379/0"),
    os.environ.get("BENCH_QUEUE", "bench-chord"),
)
stamp_task_starts(MEMBER)
stamp_task_ends(BODY)
