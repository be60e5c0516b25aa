"""The message of a job row: what an enqueue writes and what reaches the broker.

The row is the job's record (payload, headers, state, attempt); what reaches the broker is a
pointer to it: the row id as the task id and the number of the attempt to run.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

log = logging.getLogger("asanoha.outbox")


@dataclass(frozen=True)
class OutboxMessage:
    """One job enqueue. Its ``id`` is also the task id, so a republish is the same job.

    ``payload``, ``headers`` and ``trigger_result`` are written to the row; only ``id``,
    ``job_qn``, ``attempt`` and ``countdown`` are published.
    """

    id: uuid.UUID
    job_qn: str
    payload: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, Any] = field(default_factory=dict)
    #: Enqueue at most once per key (see ``find_enqueued``).
    idempotency_key: str | None = None
    #: The triggering write handler's result (JSON-safe), for ``ctx.trigger.result``.
    trigger_result: Any = None
    #: The attempt the message asks a worker to run (1-based).
    attempt: int = 1
    #: Seconds the broker holds the message before delivering it; for a new row, also
    #: the seconds its first attempt waits (``not_before``).
    countdown: float = 0.0
    #: Whether the writer publishes the new row after commit (with its countdown); else the
    #: row waits in the database and the relay publishes it when it is due: a delay longer
    #: than the broker may hold.
    by_broker: bool = True
    #: 0..9, higher delivered first (``None``: no priority).
    priority: int | None = None
    #: The claim token the row carries while it waits for this message (``None`` for a row
    #: never claimed): its publish is marked only on a row still carrying it.
    row_token: str | None = None
    #: The row's concurrency key and per-tenant slot key (see ``jobs.enqueue``).
    concurrency_key: str | None = None
    slot_key: str | None = None


class OutboxPublisher(Protocol):
    """Sends an outbox message to the broker. Raising leaves the row for the relay."""

    def publish(self, message: OutboxMessage) -> None:
        """Send ``message``; raise when the broker did not take it."""


def publish_each(
    publisher: OutboxPublisher, messages: Sequence[OutboxMessage]
) -> tuple[list[OutboxMessage], list[OutboxMessage]]:
    sent: list[OutboxMessage] = []
    failed: list[OutboxMessage] = []
    for message in messages:
        try:
            publisher.publish(message)
        except Exception:
            # The row stays pending and unpublished; the relay sends it once the broker is back.
            log.warning(
                "publishing %s (%s) attempt %d failed; left for the relay",
                message.job_qn,
                message.id,
                message.attempt,
                exc_info=True,
            )
            failed.append(message)
        else:
            sent.append(message)
    return sent, failed
