"""The jobs of ``bench/worker_throughput.py``: no-ops, so that what is measured is what
asanoha adds to each message (the claim of the attempt, its context, the end of the
attempt) over Celery's own handling of it. The keyed ones measure what a concurrency mode
adds on the worker: ``sequential`` claims under its key's lock and wakes the key's next row
at the end; ``skip`` claims as a parallel job does (its rule holds at enqueue)."""

from __future__ import annotations

from typing import Any

from asanoha import Concurrency, Feature

feature = Feature("benchjobs")
NOOP = "benchjobs:job:noop"
SEQUENTIAL = "benchjobs:job:sequential"
SKIP = "benchjobs:job:skip"


@feature.job("noop", manual=True)
def noop(payload: dict[str, Any], ctx: Any) -> None:
    """Does nothing."""
    return None


@feature.job("sequential", manual=True, concurrency=Concurrency.sequential(key=["key"]))
def sequential(payload: dict[str, Any], ctx: Any) -> None:
    """Does nothing, one attempt of a key at a time."""
    return None


@feature.job("skip", manual=True, concurrency=Concurrency.skip(key=["key"]))
def skip(payload: dict[str, Any], ctx: Any) -> None:
    """Does nothing; an enqueue of a key with a row pending or running writes none."""
    return None
