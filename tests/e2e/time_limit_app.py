"""The application of the hard-time-limit end-to-end test: a job whose first attempt ignores
its soft time limit, so that the prefork pool kills its process at the hard limit, and a job
whose first attempt ends its process; the second attempts succeed."""

from __future__ import annotations

import os
import time
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded

from asanoha.app import App
from asanoha.platform.model import Backoff, Feature

feature = Feature("stubborn")


@feature.job("ignore-limit", manual=True, retries=1, backoff=Backoff.fixed(0.1), timeout=1)
def ignore_limit(payload: dict[str, Any], ctx: Any) -> None:
    """Attempt 1 swallows ``SoftTimeLimitExceeded`` and keeps sleeping, as a job stuck in a
    call that ignores the soft limit; only the hard limit ends it."""
    if ctx.attempt > 1:
        return
    while True:
        try:
            time.sleep(60)
        except SoftTimeLimitExceeded:
            continue


@feature.job("exit-once", manual=True, retries=1, backoff=Backoff.fixed(0.1), timeout=60)
def exit_once(payload: dict[str, Any], ctx: Any) -> None:
    """Attempt 1 ends its pool process, as an out-of-memory kill would."""
    if ctx.attempt == 1:
        os._exit(1)


app = App([feature])
