"""Pending job work: broker queue depths (the probes), tasks this process's worker holds,
job rows.

A probe pass costs the same whatever other applications keep on the same broker: it asks
for the depth of this application's queues only.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from celery import Celery

from asanoha.platform.consumers import ConsumerStatus, describe_behind
from asanoha.workers.outcomes import JobOutcomes


@dataclass(frozen=True)
class PendingWork:
    """What is still to do, by where it waits."""

    #: Messages waiting in each lane queue.
    queued: dict[str, int] = field(default_factory=dict)
    #: Tasks this process's worker holds: running, or a retry waiting for its countdown
    #: (workers elsewhere show through the job rows).
    reserved: int = 0
    #: Job rows pending (waiting for an attempt, a retry or the relay) or running.
    unfinished: int = 0
    #: Consumers behind the newest committed event of their types, with their lag.
    consumers: tuple[ConsumerStatus, ...] = ()

    @property
    def total(self) -> int:
        """All pending work; 0 means idle."""
        return sum(self.queued.values()) + self.reserved + self.unfinished + len(self.consumers)

    def describe(self) -> str:
        """A one-line account, for error messages."""
        queues = ", ".join(f"{name}={count}" for name, count in self.queued.items()) or "none"
        return (
            f"queued ({queues}), reserved by workers {self.reserved}, "
            f"job rows pending or running {self.unfinished}, {describe_behind(self.consumers)}"
        )


class BrokerProbe(Protocol):
    """Counts one broker's messages of the given queues."""

    def count(self, queues: Sequence[str]) -> tuple[dict[str, int], int]:
        """Per-queue depth, and tasks this process's worker holds."""

    def close(self) -> None:
        """Release the broker connection."""


class RedisProbe:
    """Redis: the length of each lane queue (every priority sub-queue), one round trip; what
    workers hold comes from this process's own record of tasks in flight.

    Redis's ``unacked`` hash (every message a worker took and has not acknowledged) is not
    read: it is shared by every application on the Redis database, so reading it costs in
    proportion to their messages, not ours. ``drain()`` needs nothing from it: the job rows
    are the record (an attempt a worker runs is a ``running`` row, a retry waiting for its
    countdown a ``pending`` one, a message between the queue and its claim a ``pending``
    one), and a consumer advance a worker runs shows as a consumer behind until it commits.
    A cron tick or a prune a worker in another process runs is not counted, as on RabbitMQ:
    neither is pending work of the application until the tick's job row commits.
    """

    def __init__(self, celery: Celery, outcomes: JobOutcomes) -> None:
        self._connection = celery.connection_for_write()
        self._outcomes = outcomes
        self._lock = threading.Lock()

    def count(self, queues: Sequence[str]) -> tuple[dict[str, int], int]:
        with self._lock:
            channel: Any = self._connection.default_channel
            keys = [
                [channel._q_for_pri(queue, pri) for pri in channel.priority_steps]
                for queue in queues
            ]
            with channel.client.pipeline(transaction=False) as pipe:
                for queue_keys in keys:
                    for key in dict.fromkeys(queue_keys):
                        pipe.llen(key)
                results = pipe.execute()
        queued: dict[str, int] = {}
        index = 0
        for queue, queue_keys in zip(queues, keys, strict=True):
            width = len(dict.fromkeys(queue_keys))
            queued[queue] = sum(int(n) for n in results[index : index + width])
            index += width
        return queued, self._outcomes.in_flight

    def close(self) -> None:
        self._connection.release()


class DeclaringProbe:
    """Other brokers (RabbitMQ, in-memory): a passive queue declaration gives the ready count;
    what workers hold comes from this process's own record of tasks in flight.

    On RabbitMQ every read and write of its connection waits at most ``timeout`` seconds: the
    AMQP connection has no socket timeout of its own, and a broker that stopped answering (a
    channel close never acknowledged) would hang ``drain()`` or the release of the probe at
    a stack's teardown for good.
    """

    def __init__(self, celery: Celery, outcomes: JobOutcomes, timeout: float | None) -> None:
        amqp = celery.connection_for_write().transport_cls in ("amqp", "pyamqp", "amqps")
        bounded = {"read_timeout": timeout, "write_timeout": timeout} if amqp else {}
        self._connection = celery.connection_for_write(transport_options=bounded)
        self._outcomes = outcomes
        self._lock = threading.Lock()

    def count(self, queues: Sequence[str]) -> tuple[dict[str, int], int]:
        queued: dict[str, int] = {}
        with self._lock:
            try:
                for queue in queues:
                    queued[queue] = self._ready(queue)
            except self._connection.connection_errors:
                # A read that timed out leaves a frame half read, and a connection the broker
                # closed stays closed: either would fail every later count. Drop it without a
                # goodbye (the broker may not answer one); the next count connects afresh.
                self._connection.collect()
                raise
        return queued, self._outcomes.in_flight

    def _ready(self, queue: str) -> int:
        try:
            declared = self._connection.default_channel.queue_declare(queue=queue, passive=True)
        except self._connection.channel_errors:
            # A queue nobody declared yet holds nothing; the failed declaration closed the
            # channel, so start over with a fresh connection.
            self._connection.close()
            return 0
        return int(declared.message_count)

    def close(self) -> None:
        # Not while a count is reading: one AMQP connection takes one caller at a time.
        with self._lock:
            self._connection.release()


def make_probe(celery: Celery, outcomes: JobOutcomes, timeout: float | None = None) -> BrokerProbe:
    """The broker probe that suits ``celery``'s transport; ``timeout``: seconds a broker call
    may wait on RabbitMQ (Redis's come from the broker's transport options)."""
    transport = celery.connection_for_write().transport_cls
    if transport in ("redis", "rediss"):
        return RedisProbe(celery, outcomes)
    return DeclaringProbe(celery, outcomes, timeout)
