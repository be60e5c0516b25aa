"""Lanes and their queues: every job runs on one lane, every lane is one broker queue."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from celery import Celery

from asanoha.platform.model import JobDef
from asanoha.platform.model.handlers import Lane
from asanoha.platform.settings import Settings

LANES: Final[tuple[Lane, ...]] = ("worker", "api")


def queue_name(prefix: str, lane: Lane) -> str:
    """The broker queue of ``lane``; the prefix keeps stacks that share a broker apart."""
    return f"{prefix}.{lane}"


def lane_queues(settings: Settings, lanes: Sequence[Lane] = LANES) -> tuple[str, ...]:
    """The queues of ``lanes`` (every lane of this application by default), one per lane."""
    return tuple(queue_name(settings.queue_prefix, lane) for lane in lanes)


def queue_for_job(settings: Settings, job: JobDef) -> str:
    """The queue ``job`` is routed to."""
    return queue_name(settings.queue_prefix, job.lane)


def delete_queues(celery: Celery, queues: Sequence[str]) -> None:
    """Delete ``queues`` with their messages (and, on RabbitMQ, their exchanges)."""
    with celery.connection_for_write() as connection:
        channel = connection.default_channel
        for name in queues:
            queue = celery.amqp.queues[name](channel)
            # Declared first: the virtual transports (Redis) delete only what the channel knows.
            queue.declare()
            queue.delete()
            if connection.transport.driver_type == "amqp":
                queue.exchange.delete()
