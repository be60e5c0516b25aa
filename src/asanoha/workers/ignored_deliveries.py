"""A delivery that did not run its job, told to Celery and Flower as ``IGNORED``, with why.

A job message is a pointer to its row; many deliveries run nothing: the row ended already (a
duplicate or a redelivery), its attempt is not due yet, its key is busy or its job paused (the
row waits), the rate limit is full, or another delivery still runs the attempt. Returning from
the task would report each as a ``SUCCESS``.

Celery's ``Ignore`` says what happened. The trace records the state ``IGNORED`` (no result, no
``task_success`` or ``task_failure`` signal; ``task_postrun`` fires with ``state="IGNORED"``, so
``drain()`` and the attempt metrics see the delivery end, and count no attempt), and the worker
acknowledges the message (``Request.on_failure`` acknowledges an ``Ignore``, also under
``acks_late``): it is never delivered again. ``Reject`` is not: without ``requeue`` Celery
records it as a ``FAILURE`` and fires ``task_failure``, and with it the message comes back.

Celery sends no event for an ``Ignore``, so Flower would show the delivery ``STARTED`` for
ever. A ``task-ignored`` event (a custom event type, which Celery's event state, and so
Flower, turns into the state ``IGNORED``) ends it there, with the reason as its result.
"""

from __future__ import annotations

import logging
from typing import NoReturn

from celery import Task
from celery.exceptions import Ignore

from asanoha.platform.service.outbox import PENDING, RUNNING
from asanoha.workers.job_rows import Unclaimed

log = logging.getLogger("asanoha.jobs")

#: The event type Flower shows as the state ``IGNORED``.
IGNORED_EVENT = "task-ignored"


def ignore_unclaimed(task: Task, claim: Unclaimed, attempt: int) -> NoReturn:
    """End the delivery of ``attempt`` that found the row as ``claim`` (not claimed) as
    ``IGNORED``, with why."""
    if claim.state == "missing":
        ignore_delivery(task, "no job row")
    if claim.state == RUNNING and claim.attempt == attempt:
        ignore_delivery(task, f"attempt {attempt} is running in another delivery")
    if claim.early:
        ignore_delivery(task, "not due yet")
    if claim.state == PENDING and claim.attempt < attempt:
        why = "its key is busy" if claim.waiting else "its job is paused"
        ignore_delivery(task, f"waiting: {why}")
    # The row ended (or a later attempt has it): Flower keeps the state and result it showed.
    ignore_delivery(task, f"the row is {claim.state} at attempt {claim.attempt}", row_ended=True)


def ignore_delivery(task: Task, reason: str, *, row_ended: bool = False) -> NoReturn:
    """End this delivery as ``IGNORED`` (acknowledged, not run) and tell the monitors why.

    The task id is the job row's id, so Flower shows every delivery of a row as one task. The
    reason goes in its result column, unless the row has ended (``row_ended``): a copy of an
    ended attempt's message must not overwrite the result Flower shows for it (whose state
    stays, an ``IGNORED`` event ranking below ``SUCCESS`` and ``FAILURE``)."""
    if task.app.conf.worker_send_task_events:
        shown = {} if row_ended else {"result": f"not run: {reason}"}
        try:
            task.send_event(IGNORED_EVENT, retry=False, reason=reason, **shown)
        except Exception:
            # Only the monitors miss it: the delivery is acknowledged all the same.
            log.warning("%s %s: sending the %s event failed", task.name, task.request.id,
                        IGNORED_EVENT, exc_info=True)  # fmt: skip
    raise Ignore(reason)
