"""The peer worker of ``bench/memory.py`` and ``bench/worker_throughput.py``: a bare Celery
app, configured from the environment (``BENCH_BROKER_URL``, ``BENCH_QUEUE``) with asanoha's
delivery settings (late acks, prefetch 1, task events)."""

from __future__ import annotations

import os

import redis
from celery import Celery

from _stamps import stamp_task_ends

BROKER_URL = os.environ.get("BENCH_BROKER_URL", "redis://127.0.0.1:6379/0")
QUEUE = os.environ.get("BENCH_QUEUE", "bench-bare")

app = Celery("bench_bare", broker=BROKER_URL, set_as_current=False)
app.conf.update(
    task_default_queue=QUEUE,
    task_ignore_result=True,
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    worker_prefetch_multiplier=1,
    worker_send_task_events=True,
    task_send_sent_event=True,
    broker_connection_retry_on_startup=True,
)


@app.task(name="bench.count")
def count(key: str) -> None:
    """Count one run in Redis, so the benchmark knows when every task has run."""
    redis.Redis.from_url(BROKER_URL).incr(key)


@app.task(name="bench.noop")
def noop() -> None:
    """Does nothing: the peer of asanoha's no-op job."""
    return None


stamp_task_ends("bench.noop")
