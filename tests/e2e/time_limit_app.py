"""The application of the hard-time-limit end-to-end test: a job whose first attempt ignores
its soft time limit, so that the prefork pool kills its process at the hard limit; the
second attempt succeeds."""

from __future__ import annotations

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


app = App([feature])
