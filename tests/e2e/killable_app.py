"""The application the end-to-end worker processes run (settings from ``ASANOHA_*``).

Its one job reports to a Redis list when it starts and when it finishes; in a worker started
with ``E2E_ROLE=victim`` it blocks instead of finishing, so the test can kill that worker
while the job runs.
"""

from __future__ import annotations

import os
import time
from typing import Any

import redis

from asanoha.app import App
from asanoha.platform.model import Backoff, Feature

feature = Feature("e2e")


@feature.job("long-running", manual=True, retries=1, backoff=Backoff.fixed(0.1), timeout=1)
def long_running(payload: dict[str, Any], ctx: Any) -> None:
    signals = redis.Redis.from_url(os.environ["E2E_SIGNAL_URL"])
    key = payload["signal_key"]
    signals.rpush(f"{key}:started", os.getpid())
    if os.environ.get("E2E_ROLE") == "victim":
        # The test kills this worker long before the time limit ends the attempt (a
        # blocking sleep outlasts Celery's soft limit in the solo pool).
        time.sleep(120)
    signals.rpush(f"{key}:done", os.getpid())


app = App([feature])
celery = app.celery
# Nothing sends these workers commands, and control bindings would outlive the test.
celery.conf.worker_enable_remote_control = False
