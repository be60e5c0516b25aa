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
from asanoha.platform.model import Feature

feature = Feature("e2e")


@feature.job("long-running", manual=True)
def long_running(payload: dict[str, Any], ctx: Any) -> None:
    signals = redis.Redis.from_url(os.environ["E2E_SIGNAL_URL"])
    key = payload["signal_key"]
    signals.rpush(f"{key}:started", os.getpid())
    if os.environ.get("E2E_ROLE") == "victim":
        time.sleep(120)  # the test kills this worker long before
    signals.rpush(f"{key}:done", os.getpid())


app = App([feature])
celery = app.celery
# A killed Redis consumer's messages come back once the visibility timeout has passed; check
# for them every second rather than every 100 s (the transport's default sweep).
# Nothing sends these workers commands, and control bindings would outlive the test.
celery.conf.worker_enable_remote_control = False
celery.conf.broker_transport_options = {
    **celery.conf.broker_transport_options,
    "unacked_restore_interval": 1,
    "unacked_restore_throttle": 1,
}
