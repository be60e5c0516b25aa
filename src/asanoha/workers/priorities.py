"""Job priorities (0..9, higher first) on the broker: the message property and what the
lane queues need for it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from asanoha.platform.model import Registry
from asanoha.platform.service import OutboxMessage


@dataclass(frozen=True)
class JobPriorities:
    """How job priorities (0..9, higher first) reach the broker, when the application
    declares any (else nothing changes: no message property, no queue argument).

    RabbitMQ orders a queue's ready messages by the ``priority`` property once the queue is
    declared with ``x-max-priority``; Redis (kombu) keeps one list per priority step and
    takes from the list of the lowest number first, so the platform's priority is sent
    reversed (9 - p), over ten steps.
    """

    #: Whether any job declares a priority.
    used: bool
    scheme: str
    #: job qn -> its declared priority
    declared: dict[str, int | None]

    @classmethod
    def of(cls, registry: Registry, broker_url: str) -> JobPriorities:
        declared = {job.qn: job.priority for job in registry.jobs}
        used = any(priority is not None for priority in declared.values())
        return cls(used, broker_url.split("://", 1)[0], declared)

    @property
    def is_amqp(self) -> bool:
        return self.scheme.startswith("amqp") or self.scheme == "pyamqp"

    @property
    def queue_arguments(self) -> dict[str, Any] | None:
        """The lane queues' arguments: ``x-max-priority`` on RabbitMQ."""
        return {"x-max-priority": 9} if self.used and self.is_amqp else None

    def broker_priority(self, message: OutboxMessage) -> int | None:
        """The ``priority`` property of ``message``: its row's priority, else its job's,
        else 0 (the lowest)."""
        if not self.used or self.scheme == "memory":
            return None
        priority = message.priority
        if priority is None:
            priority = self.declared.get(message.job_qn) or 0
        return priority if self.is_amqp else 9 - priority
