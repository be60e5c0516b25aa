"""The application of the redelivery end-to-end test: a job that runs a few seconds and
reports when each attempt starts and ends to a Redis list (``E2E_SIGNAL_URL``)."""

from __future__ import annotations

import json
import os
import time
from typing import Any

import redis

from asanoha.app import App
from asanoha.platform.model import Backoff, Feature

feature = Feature("redelivered")

#: Seconds the job runs.
RUN_SECONDS = 5.0


@feature.job("slow", manual=True, retries=1, backoff=Backoff.fixed(0.1), timeout=8)
def slow(payload: dict[str, Any], ctx: Any) -> None:
    signals = redis.Redis.from_url(os.environ["E2E_SIGNAL_URL"])
    key = payload["signal_key"]
    signals.rpush(key, json.dumps(["started", ctx.attempt, os.getpid(), time.time()]))
    time.sleep(RUN_SECONDS)
    signals.rpush(key, json.dumps(["ended", ctx.attempt, os.getpid(), time.time()]))


app = App([feature])
