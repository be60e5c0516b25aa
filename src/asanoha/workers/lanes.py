"""Lanes and their queues: every job runs on one lane, every lane is one broker queue; the
platform's own tasks have queues of their own beside them.

The platform's tasks are not jobs: consumer wake-ups (at most one pending per consumer
partition, see ``consumer_wake``), cron ticks and the prune of finished job rows. On a queue
of their own they never wait behind a backlog of jobs, no job waits behind them, and a
scaler watching the lane queues counts jobs only. Nor do they share the job pool: a worker
consumes them beside its task consumer and runs them on threads of its own
(``platform_threads``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Literal

from celery import Celery

from asanoha.platform.model import JobDef
from asanoha.platform.model.handlers import Lane
from asanoha.platform.settings import Settings

LANES: Final[tuple[Lane, ...]] = ("worker", "api")

#: The platform's own queues: consumer wake-ups, and cron ticks with the prune.
PlatformQueue = Literal["consumers", "cron"]
PLATFORM_QUEUES: Final[tuple[PlatformQueue, ...]] = ("consumers", "cron")


def queue_name(prefix: str, lane: Lane | PlatformQueue) -> str:
    """The broker queue of ``lane`` (or of the platform's tasks of one kind); the prefix
    keeps stacks that share a broker apart."""
    return f"{prefix}.{lane}"


def lane_queues(settings: Settings, lanes: Sequence[Lane] = LANES) -> tuple[str, ...]:
    """The queues of ``lanes`` (every lane of this application by default), one per lane."""
    return tuple(queue_name(settings.queue_prefix, lane) for lane in lanes)


def platform_queue(settings: Settings, kind: PlatformQueue) -> str:
    """The queue of the platform's tasks of ``kind``."""
    return queue_name(settings.queue_prefix, kind)


def app_queues(settings: Settings, lanes: Sequence[Lane] = LANES) -> tuple[str, ...]:
    """Every queue a worker of this application consumes: the queues of ``lanes`` (every
    lane by default), then the platform's. What ``drain()`` counts and a test stack deletes."""
    return lane_queues(settings, lanes) + tuple(
        queue_name(settings.queue_prefix, kind) for kind in PLATFORM_QUEUES
    )


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
