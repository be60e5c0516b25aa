"""The job of ``bench/worker_throughput.py``: a no-op, so that what is measured is what
asanoha adds to each message (the claim of the attempt, its context, the end of the
attempt) over Celery's own handling of it."""

from __future__ import annotations

from typing import Any

from asanoha import Feature

feature = Feature("benchjobs")
NOOP = "benchjobs:job:noop"


@feature.job("noop", manual=True)
def noop(payload: dict[str, Any], ctx: Any) -> None:
    """Does nothing."""
    return None
