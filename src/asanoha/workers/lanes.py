"""Lanes and their queues: every job runs on one lane, every lane is one broker queue."""

from __future__ import annotations

from typing import Final

from asanoha.platform.model import JobDef
from asanoha.platform.model.handlers import Lane
from asanoha.platform.settings import Settings

LANES: Final[tuple[Lane, ...]] = ("worker", "api")


def queue_name(prefix: str, lane: Lane) -> str:
    """The broker queue of ``lane``; the prefix keeps stacks that share a broker apart."""
    return f"{prefix}.{lane}"


def lane_queues(settings: Settings) -> tuple[str, ...]:
    """Every queue of this application, one per lane."""
    return tuple(queue_name(settings.queue_prefix, lane) for lane in LANES)


def queue_for_job(settings: Settings, job: JobDef) -> str:
    """The queue ``job`` is routed to."""
    return queue_name(settings.queue_prefix, job.lane)
