"""Pending job work: broker queue depths and reserved messages (the probes), job rows."""

from __future__ import annotations

import json
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
    #: Messages a worker holds: running, or a retry waiting for its countdown.
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
        """Per-queue depth, and messages reserved by workers."""

    def close(self) -> None:
        """Release the broker connection."""


class RedisProbe:
    """Redis: list lengths (every priority sub-queue) and the ``unacked`` hash, one round trip.

    ``unacked`` holds every message a worker has taken and not acknowledged: with late acks
    that is every running task, and also every retry waiting for its countdown. The hash is
    shared by all queues of the Redis database, so only entries routed to our queues count.
    """

    def __init__(self, celery: Celery) -> None:
        self._connection = celery.connection_for_write()
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
                pipe.hvals(channel.unacked_key)
                results = pipe.execute()
        queued: dict[str, int] = {}
        index = 0
        for queue, queue_keys in zip(queues, keys, strict=True):
            width = len(dict.fromkeys(queue_keys))
            queued[queue] = sum(int(n) for n in results[index : index + width])
            index += width
        wanted = set(queues)
        reserved = sum(1 for raw in results[index] if _routing_key(raw) in wanted)
        return queued, reserved

    def close(self) -> None:
        self._connection.release()


def _routing_key(raw: bytes | str) -> str | None:
    try:
        entry = json.loads(raw)
    except ValueError:
        return None
    # Each entry is [message, exchange, routing_key].
    if isinstance(entry, list) and len(entry) == 3 and isinstance(entry[2], str):
        return entry[2]
    return None


class DeclaringProbe:
    """Other brokers (RabbitMQ, in-memory): a passive queue declaration gives the ready count;
    what workers hold comes from this process's own record of tasks in flight."""

    def __init__(self, celery: Celery, outcomes: JobOutcomes) -> None:
        self._connection = celery.connection_for_write()
        self._outcomes = outcomes
        self._lock = threading.Lock()

    def count(self, queues: Sequence[str]) -> tuple[dict[str, int], int]:
        queued: dict[str, int] = {}
        with self._lock:
            for queue in queues:
                queued[queue] = self._ready(queue)
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
        self._connection.release()


def make_probe(celery: Celery, outcomes: JobOutcomes) -> BrokerProbe:
    """The broker probe that suits ``celery``'s transport."""
    transport = celery.connection_for_write().transport_cls
    if transport in ("redis", "rediss"):
        return RedisProbe(celery)
    return DeclaringProbe(celery, outcomes)
