"""Outbox messages to Celery: a pointer to the job row, never its payload."""

from __future__ import annotations

from collections.abc import Callable

from celery import Celery

from asanoha.platform.service import OutboxMessage


class CeleryOutboxPublisher:
    """Sends each outbox message as the task of its job.

    The task id is the job row id and the only argument the attempt, so nothing personal
    reaches the broker, Flower or ``celery inspect``; a relay that republishes a row the
    writer already sent delivers the same logical job again, which the claim acknowledges
    without running.
    """

    def __init__(
        self,
        celery: Celery,
        route: Callable[[str], str],
        priority: Callable[[OutboxMessage], int | None] | None = None,
    ) -> None:
        self.celery = celery
        #: job qn -> queue name
        self.route = route
        #: message -> the broker's ``priority`` property (``None``: none sent)
        self.priority = priority or (lambda message: None)

    def publish(self, message: OutboxMessage) -> None:
        """Send ``message``; raises when the broker does not take it."""
        self.celery.send_task(
            message.job_qn,
            kwargs={"attempt": message.attempt},
            task_id=str(message.id),
            queue=self.route(message.job_qn),
            # attempt = retries + 1 on the worker, as for Celery's own retries.
            retries=message.attempt - 1,
            countdown=message.countdown or None,
            priority=self.priority(message),
        )
