"""Consumer wake-ups run on a few threads of the worker's main process, never in its pool.

A wake-up task (``consumer_wake``) advances one consumer partition for up to its round
budget. Taken by the worker's task consumer, it would count against the worker's prefetch
(one message per pool slot, acknowledged late), so a pool busy with jobs would not even
fetch it, and it would then take a pool slot a job could have had. Instead every worker
consumes the consumers queue on a channel of its own (``WakeConsumerStep``, a Celery
consumer bootstep), acknowledges each wake-up on receipt, waits out its countdown on the
worker's timer and runs it on a small thread pool of the main process
(``ASANOHA_CONSUMER_WAKE_THREADS``), where the worker's tick already runs its passes. Jobs
never wait behind a wake-up, and a wake-up never waits for a job.

A worker whose task consumer is given the consumers queue all the same (``celery worker``
without ``--queues``) runs those wake-ups on the same threads: the task's Celery strategy
(``Task.Strategy``, what the main process does with a received message) is this module's.

Acknowledged on receipt: a worker that dies holding a wake-up loses it, like a wake-up whose
message expired; its row is taken as lost after the task's expiry, and the tick delivers
meanwhile. The task still runs through Celery's trace (``Request.execute``), so its signals
fire and its errors are logged as a task's; it sends no task events, so Flower lists jobs
only.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from celery import Celery, Task, bootsteps, signals
from celery.utils.time import timezone
from celery.worker.request import Request
from kombu.asynchronous.timer import to_timestamp
from kombu.messaging import Consumer

log = logging.getLogger("asanoha.consumers")


class WakeThreads:
    """The threads that run wake-up tasks: at most ``threads`` at once, the rest queued."""

    def __init__(self, threads: int) -> None:
        self.threads = threads
        self._lock = threading.Lock()
        # Made on first use, in the process that receives the messages: a prefork parent
        # forks its children before, so they inherit no thread of it.
        self._executor: ThreadPoolExecutor | None = None
        self._closed = False

    def submit(self, request: Request) -> None:
        """Run ``request``'s task on one of the threads, as soon as one is free."""
        with self._lock:
            if self._closed:
                # A countdown that ended after the worker stopped: the row's expiry and the
                # tick cover it.
                log.debug("dropping wake-up %s: the worker is stopping", request.id)
                return
            if self._executor is None:
                self._executor = ThreadPoolExecutor(
                    self.threads, thread_name_prefix="asanoha-consumer-wake"
                )
            self._executor.submit(_execute, request)

    def close(self) -> None:
        """Let the running tasks finish, drop the queued ones."""
        with self._lock:
            self._closed = True
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)

    def reopen(self) -> None:
        """Take tasks again (a worker started anew in the same process, as tests do)."""
        with self._lock:
            self._closed = False


def _execute(request: Request) -> None:
    try:
        request.execute()
    except Exception:
        # The trace logs a task's own failure; this is the trace itself failing.
        log.exception("running wake-up %s failed", request.id)


def wake_handler(
    threads: WakeThreads, task: Task, app: Celery, consumer: Any
) -> Callable[[Any, Any, Any], None]:
    """What the worker's main process does with a wake-up message of ``task``: acknowledge
    it (``ack(logger, errors)``), then run it on ``threads`` (after its countdown, on
    ``consumer``'s timer)."""
    hostname = consumer.hostname
    connection_errors = consumer.connection_errors
    call_at = consumer.timer.call_at

    def on_message(message: Any, ack: Any, reject: Any) -> None:
        # The platform publishes with Celery's message protocol 2: ``Request`` decodes the
        # body when the task runs.
        request = Request(
            message,
            on_ack=ack,
            on_reject=reject,
            app=app,
            hostname=hostname,
            eventer=None,
            task=task,
            connection_errors=connection_errors,
            body=message.body,
            headers=message.headers,
            decoded=False,
            utc=True,
        )
        if request.expires and request.revoked():
            return  # Acknowledged and announced by ``revoked()``.
        request.acknowledge()
        signals.task_received.send(sender=consumer, request=request)
        if request.eta is None:
            threads.submit(request)
            return
        due = to_timestamp(timezone.to_system(request.eta))  # type: ignore[no-untyped-call]
        call_at(due, threads.submit, (request,), priority=6)

    return on_message


class WakeStrategy:
    """The advance task's ``Task.Strategy``, for a task consumer given the consumers queue:
    called by the worker's consumer for each task type it starts, it returns the handler of
    that type's messages.

    An object rather than a function: a function as a class attribute would be bound to
    the task on access."""

    def __init__(self, threads: WakeThreads) -> None:
        self._threads = threads

    def __call__(self, task: Task, app: Celery, consumer: Any, **_: Any) -> Callable[..., None]:
        handle = wake_handler(self._threads, task, app, consumer)

        def on_task_message(
            message: Any, body: Any, ack: Any, reject: Any, callbacks: Any, **_: Any
        ) -> None:
            handle(message, ack, reject)

        return on_task_message


def add_wake_consumer(celery: Celery, threads: WakeThreads, queue: str, task_name: str) -> None:
    """Have every worker of ``celery`` consume ``queue`` (the wake-ups of ``task_name``) on
    a channel of its own and run them on ``threads``; stop them with the worker."""

    class WakeConsumerStep(bootsteps.ConsumerStep):  # type: ignore[misc]
        """Consumes the consumers queue beside the task consumer, on its own channel (so
        its own prefetch)."""

        def get_consumers(self, channel: Any) -> list[Consumer]:
            threads.reopen()
            consumer = self.consumer
            handle = wake_handler(threads, celery.tasks[task_name], celery, consumer)
            # Acknowledged on receipt, so the prefetch bounds only the messages between the
            # broker and the handler.
            wakes = Consumer(  # type: ignore[no-untyped-call]
                channel,
                queues=[celery.amqp.queues[queue]],
                on_message=lambda message: handle(
                    message, message.ack_log_error, message.reject_log_error
                ),
                accept=celery.conf.accept_content,
                prefetch_count=threads.threads,
            )
            return [wakes]

        def start(self, c: Any) -> None:
            self.consumer = c
            super().start(c)

    class WakeThreadsStep(bootsteps.StartStopStep):  # type: ignore[misc]
        """Closes the wake-up threads at the worker's stop, after the running ones end."""

        def stop(self, worker: Any) -> None:
            threads.close()

        shutdown = stop

    celery.steps["consumer"].add(WakeConsumerStep)
    celery.steps["worker"].add(WakeThreadsStep)
