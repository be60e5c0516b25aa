"""Outbox messages to Celery: the publisher the service calls after commit, and the relay task."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from celery import Celery, Task

from asanoha.platform.service import OutboxMessage, Service
from asanoha.workers.beat import RELAY_TASK_NAME
from asanoha.workers.redaction import task_reprs


class CeleryOutboxPublisher:
    """Sends each outbox message as the task of its job.

    The task id is the outbox row id, so a relay that republishes a row the writer already
    sent (it died before marking it) delivers the same logical job again, not a second one.
    """

    def __init__(
        self,
        celery: Celery,
        route: Callable[[str], str],
        personal_keys: Mapping[str, frozenset[str]],
    ) -> None:
        self.celery = celery
        #: job qn -> queue name
        self.route = route
        self._personal_keys = personal_keys

    def publish(self, message: OutboxMessage) -> None:
        """Send ``message``; raises when the broker does not take it."""
        meta = dict(message.headers)
        self.celery.send_task(
            message.job_qn,
            args=[message.payload],
            kwargs={"meta": meta},
            task_id=str(message.id),
            queue=self.route(message.job_qn),
            **task_reprs(
                message.payload, meta, self._personal_keys.get(message.job_qn, frozenset())
            ),
        )


def register_relay_task(celery: Celery, service: Service) -> Task:
    """The beat task that republishes outbox rows left unpublished."""

    @celery.task(name=RELAY_TASK_NAME, ignore_result=True, shared=False)  # type: ignore[untyped-decorator]
    def relay_outbox() -> int:
        return service.relay_outbox()

    task: Task = relay_outbox
    return task
