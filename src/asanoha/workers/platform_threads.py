"""The platform's own tasks run on a few threads of the worker's main process, never in its
job pool.

The platform's tasks are consumer wake-ups (``consumer_wake``: one consumer partition
advanced for up to a round budget), cron ticks and the prunes (``cron_tasks``). Taken by the
worker's task consumer, each would count against its prefetch (one message per pool slot,
acknowledged late), so a pool busy with jobs would not even fetch it, and it would then take
a pool slot a job could have had. Instead every worker consumes the platform's queues on a
channel of its own (``PlatformConsumerStep``, a Celery consumer bootstep), acknowledges each
task on receipt, waits out its countdown on the worker's timer and runs it on threads of the
main process, where the worker's tick already runs its consumer passes: wake-ups on
``ASANOHA_CONSUMER_WAKE_THREADS`` threads, cron ticks and prunes on ``CRON_THREADS`` of their
own (a long prune never holds a wake-up back). Jobs never wait behind a platform task, and a
platform task never waits for a job.

A worker whose task consumer is given those queues all the same (``celery worker`` without
``--queues``) runs their tasks the same way: each platform task's Celery strategy
(``Task.Strategy``, what the main process does with a received message) is this module's.

Acknowledged on receipt: a worker that dies holding a task loses it. A wake-up's row is
then taken as lost after the task's expiry, and the tick delivers meanwhile; a lost cron
tick is a tick missed, which the next one (or ``catch_up=True``) covers, as when beat was
down; a lost prune runs at its next hour. The tasks still run through Celery's trace
(``Request.execute``): their signals fire, their retries (a cron tick whose database
failed) are published as Celery's, their errors are logged as a task's. They send no task
events, so Flower lists jobs only.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from celery import Celery, Task, bootsteps, signals
from celery.utils.time import timezone
from celery.worker.request import Request
from kombu.asynchronous.timer import to_timestamp
from kombu.messaging import Consumer

#: Threads that run cron ticks and prunes in each worker.
CRON_THREADS = 2

log = logging.getLogger("asanoha.workers")


class PlatformThreads:
    """Threads that run platform tasks: at most ``threads`` at once, the rest queued."""

    def __init__(self, threads: int, name: str) -> None:
        self.threads = threads
        self._name = name
        self._lock = threading.Lock()
        # Made on first use, in the process that receives the messages: a prefork parent
        # forks its children before, so they inherit no thread of it.
        self._executor: ThreadPoolExecutor | None = None
        self._closed = False

    def submit(self, request: Request) -> None:
        """Run ``request``'s task on one of the threads, as soon as one is free."""
        with self._lock:
            if self._closed:
                # A countdown that ended after the worker stopped: dropped, as a worker that
                # died would have (see the module's text).
                log.debug("dropping %s %s: the worker is stopping", request.name, request.id)
                return
            if self._executor is None:
                self._executor = ThreadPoolExecutor(self.threads, thread_name_prefix=self._name)
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
        log.exception("running %s %s failed", request.name, request.id)


def platform_handler(
    threads: PlatformThreads, task: Task, app: Celery, consumer: Any
) -> Callable[[Any, Any, Any], None]:
    """What the worker's main process does with a message of the platform task ``task``:
    acknowledge it (``ack(logger, errors)``), then run it on ``threads`` (after its
    countdown, on ``consumer``'s timer)."""
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


class PlatformStrategy:
    """A platform task's ``Task.Strategy``, for a task consumer given a platform queue:
    called by the worker's consumer for each task type it starts, it returns the handler of
    that type's messages.

    An object rather than a function: a function as a class attribute would be bound to
    the task on access."""

    def __init__(self, threads: PlatformThreads) -> None:
        self._threads = threads

    def __call__(self, task: Task, app: Celery, consumer: Any, **_: Any) -> Callable[..., None]:
        handle = platform_handler(self._threads, task, app, consumer)

        def on_task_message(
            message: Any, body: Any, ack: Any, reject: Any, callbacks: Any, **_: Any
        ) -> None:
            handle(message, ack, reject)

        return on_task_message


def add_platform_consumer(celery: Celery, tasks: Mapping[str, PlatformThreads]) -> None:
    """Run the platform ``tasks`` (task name -> its threads) on threads of every worker of
    ``celery``: consumed from the queues they are routed to, beside the task consumer, and
    given those strategies for a task consumer that takes them anyway. The threads stop
    with the worker."""
    for name, threads in tasks.items():
        celery.tasks[name].Strategy = PlatformStrategy(threads)
    queues = {celery.amqp.router.route({}, name)["queue"].name for name in tasks}
    pools = list({id(threads): threads for threads in tasks.values()}.values())

    class PlatformConsumerStep(bootsteps.ConsumerStep):  # type: ignore[misc]
        """Consumes the platform's queues beside the task consumer, on its own channel (so
        its own prefetch)."""

        def get_consumers(self, channel: Any) -> list[Consumer]:
            for threads in pools:
                threads.reopen()
            handlers = {
                name: platform_handler(threads, celery.tasks[name], celery, self.worker_consumer)
                for name, threads in tasks.items()
            }

            def on_message(message: Any) -> None:
                name = str((message.headers or {}).get("task"))
                handle = handlers.get(name)
                if handle is None:
                    # Not a platform task (a job published to the wrong queue): given back
                    # to no one, so it is not retried into the same queue for ever.
                    log.warning("dropping a message of %r on a platform queue", name)
                    message.reject_log_error(log, self.worker_consumer.connection_errors)
                    return
                handle(message, message.ack_log_error, message.reject_log_error)

            # Acknowledged on receipt, so the prefetch bounds only the messages between the
            # broker and the handler.
            consumer = Consumer(  # type: ignore[no-untyped-call]
                channel,
                queues=[celery.amqp.queues[name] for name in queues],
                on_message=on_message,
                accept=celery.conf.accept_content,
                prefetch_count=sum(threads.threads for threads in pools),
            )
            return [consumer]

        def start(self, c: Any) -> None:
            self.worker_consumer = c
            super().start(c)

    class PlatformThreadsStep(bootsteps.StartStopStep):  # type: ignore[misc]
        """Closes the platform threads at the worker's stop, after their running tasks."""

        def stop(self, worker: Any) -> None:
            for threads in pools:
                threads.close()

        shutdown = stop

    celery.steps["consumer"].add(PlatformConsumerStep)
    celery.steps["worker"].add(PlatformThreadsStep)
