"""The peer worker of ``bench/memory.py``: a bare Celery app with one task, configured from
the environment (``BENCH_BROKER_URL``, ``BENCH_QUEUE``) with asanoha's delivery settings."""

from __future__ import annotations

import os

import redis
from celery import Celery

BROKER_URL = os.environ.get("BENCH_BROKER_URL", "redis://127.0.0.1:6379/0")
QUEUE = os.environ.get("BENCH_QUEUE", "bench-bare")

app = Celery("bench_bare", broker=BROKER_URL, set_as_current=False)
app.conf.update(
    task_default_queue=QUEUE,
    task_ignore_result=True,
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    worker_prefetch_multiplier=1,
    broker_connection_retry_on_startup=True,
)


@app.task(name="bench.count")
def count(key: str) -> None:
    """Count one run in Redis, so the benchmark knows when every task has run."""
    redis.Redis.from_url(BROKER_URL).incr(key)
