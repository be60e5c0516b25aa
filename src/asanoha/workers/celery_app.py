"""``make_celery``: the Celery side of an asanoha application, as one typed object."""

from __future__ import annotations

import gc
import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from celery import Celery, signals
from kombu.entity import Exchange, Queue

from asanoha.platform.jobs.attempts import JobRows, job_rows_for
from asanoha.platform.model import Registry
from asanoha.platform.settings import Settings
from asanoha.workers.attempts import AttemptRunner
from asanoha.workers.beat import (
    CRON_TASK_NAME,
    PRUNE_EVENTS_TASK_NAME,
    PRUNE_TASK_NAME,
    build_beat_schedule,
)
from asanoha.workers.boot_jobs import enqueue_boot_jobs
from asanoha.workers.broker_connection import BrokerAMQP
from asanoha.workers.consumer_tick import add_consumer_tick
from asanoha.workers.consumer_wake import ADVANCE_TASK_NAME, ConsumerWakes, register_advance_task
from asanoha.workers.cron_tasks import register_cron_tasks
from asanoha.workers.job_task import register_job_task
from asanoha.workers.lanes import app_queues, platform_queue, queue_for_job, queue_name
from asanoha.workers.log_hooks import keep_personal_values_out_of_task_lines
from asanoha.workers.outbox_publisher import CeleryOutboxPublisher
from asanoha.workers.outcomes import JobOutcomes
from asanoha.workers.pending import BrokerProbe, make_probe
from asanoha.workers.platform_threads import CRON_THREADS, PlatformThreads, add_platform_consumer
from asanoha.workers.priorities import JobPriorities
from asanoha.workers.relay_loop import RelayLoop
from asanoha.workers.retry_policy import check_job_limits

if TYPE_CHECKING:
    from asanoha.app import App

log = logging.getLogger("asanoha.workers")

#: The in-memory transport polls once a second by default: about a second per job.
MEMORY_POLLING_INTERVAL = 0.005
#: Seconds a blocking broker call may wait: a broker that stops answering without closing
#: the connection must not hang a publish, a probe or ``drain()``.
BROKER_SOCKET_TIMEOUT = 5.0


@dataclass
class CeleryJobs:
    """What the Celery side of one application owns: the Celery app, the outbox publisher,
    the attempt runner, the worker relay, the task outcomes ``drain()`` waits on, and the
    broker probe (opened on first use)."""

    celery: Celery
    publisher: CeleryOutboxPublisher
    runner: AttemptRunner
    relay: RelayLoop
    outcomes: JobOutcomes
    rows: JobRows
    app: App
    #: Whether a worker started with this Celery app runs the relay in its main process
    #: (``asanoha worker`` and ``celery worker`` do; a test stack's ``drain()`` relays itself).
    relay_in_worker: bool = True
    #: The consumers' wake-ups (``None`` when the application has no consumer).
    wakes: ConsumerWakes | None = None
    _probe: BrokerProbe | None = field(default=None, repr=False)

    def probe(self) -> BrokerProbe:
        """The broker probe (queue depths, reserved messages), opened on first use."""
        if self._probe is None:
            self._probe = make_probe(self.celery, self.outcomes, BROKER_SOCKET_TIMEOUT)
        return self._probe

    def request_consumer_wakes(
        self,
        names: Sequence[str] | None = None,
        keys: Mapping[str, Collection[int]] | None = None,
    ) -> int:
        """Wake the consumers ``names`` (every one by default; for a name in ``keys``, the
        partitions owning those partition keys) whose partitions have no wake-up pending;
        return how many tasks were published."""
        return self.wakes.request(names, keys) if self.wakes is not None else 0

    def connect_worker_signals(self) -> None:
        """Hook the worker's process lifecycle: reset engines after the pool forks, run the
        relay in the main process while the worker runs. Weak receivers: an application
        that is gone takes them with it."""
        signals.worker_process_init.connect(
            self.app.database.forget_inherited_connections, weak=True
        )
        signals.worker_process_init.connect(self.rows.forget_inherited_connections, weak=True)
        signals.worker_process_init.connect(self.relay.forget_inherited_connections, weak=True)
        signals.worker_before_create_process.connect(freeze_before_fork, weak=False)
        signals.worker_ready.connect(self._on_worker_ready, weak=True)
        signals.worker_shutdown.connect(self._on_worker_shutdown, weak=True)
        keep_personal_values_out_of_task_lines()

    def close(self) -> None:
        """Stop the relay, release the probe's broker connection and the claim engine."""
        self.relay.stop()
        self.rows.close()
        if self._probe is not None:
            self._probe.close()
            self._probe = None

    def _on_worker_ready(self, sender: Any = None, **_: Any) -> None:
        if getattr(sender, "app", None) is not self.celery:
            return
        if self.relay_in_worker:
            self.relay.start()
        self.enqueue_boot_jobs()

    def enqueue_boot_jobs(self) -> None:
        """Enqueue this release's boot jobs (once per release, fleet-wide); a failure is
        logged, not fatal: the next worker that starts enqueues them."""
        try:
            enqueue_boot_jobs(self.app.service, self.app.settings)
        except Exception:
            log.warning("enqueuing the boot jobs failed; the next worker start tries again",
                        exc_info=True)  # fmt: skip

    def _on_worker_shutdown(self, sender: Any = None, **_: Any) -> None:
        if getattr(sender, "app", None) is self.celery:
            self.relay.stop()


def make_celery(app: App) -> CeleryJobs:
    """The Celery side of ``app``: one task per job (named by its QN, routed to its lane's
    queue), the cron and prune tasks and the beat schedule, the publisher and the relay,
    the consumers' advance task and worker tick.

    Raises ``DefinitionError`` for a job whose run can outlive the visibility timeout or whose
    cron expression does not parse.
    """
    settings = app.settings
    registry = app.registry
    check_job_limits(registry.jobs, settings)
    celery = _configured_celery(registry, settings)
    default_queue = queue_name(settings.queue_prefix, "worker")

    def route(job_qn: str) -> str:
        job = registry.job(job_qn)
        return queue_for_job(settings, job) if job is not None else default_queue

    priorities = JobPriorities.of(registry, settings.broker_url)
    publisher = CeleryOutboxPublisher(celery, route, priorities.broker_priority)
    # A row waiting for a busy key is woken by the end that frees the key; the relay sends
    # it only should that wake be lost, a visibility timeout later.
    rows = job_rows_for(
        app.database, app.service.tables, wake_lost_after=settings.visibility_timeout
    )
    # The end of a step's job row ends the step in its run (``platform/jobs/workflows``):
    # a declared workflow's, or a canvas's, whose steps are any declared jobs.
    rows.workflow_of = registry.workflow
    runner = AttemptRunner(app.service, rows, publisher, settings)
    for job in registry.jobs:
        register_job_task(celery, runner, job, settings)
    register_cron_tasks(celery, app.service, settings, tenants=app.tenants)
    platform_tasks = dict.fromkeys(
        (CRON_TASK_NAME, PRUNE_TASK_NAME, PRUNE_EVENTS_TASK_NAME),
        PlatformThreads(CRON_THREADS, "asanoha-cron"),
    )
    wakes = ConsumerWakes(celery, app.consumers, settings) if app.consumers else None
    if wakes is not None:
        register_advance_task(celery, wakes)
        platform_tasks[ADVANCE_TASK_NAME] = PlatformThreads(
            settings.consumer_wake_threads, "asanoha-consumer-wake"
        )
        if settings.consumer_tick_interval > 0:
            add_consumer_tick(celery, app.consumers, settings.consumer_tick_interval)
    # Every worker runs them on threads of its main process, never in the job pool.
    add_platform_consumer(celery, platform_tasks)
    outcomes = JobOutcomes(celery)
    relay = RelayLoop(
        app.database.url.render_as_string(hide_password=False),
        app.service.tables,
        publisher,
        settings.relay_interval,
        retries_of=lambda job_qn: _retries_of(registry, job_qn),
        # Beyond the visibility timeout no attempt is still running: its time limit is
        # shorter (checked at boot), and Redis would have delivered it again by then.
        lost_after=settings.visibility_timeout,
        queue_of=route,
        # A connection of the relay's own: drain() counts on the other one from its thread.
        open_probe=lambda: make_probe(celery, outcomes, BROKER_SOCKET_TIMEOUT),
        job_lanes=app.service.job_lanes,
    )
    jobs = CeleryJobs(celery, publisher, runner, relay, outcomes, rows, app, wakes=wakes)
    jobs.connect_worker_signals()
    return jobs


def _retries_of(registry: Registry, job_qn: str) -> int:
    job = registry.job(job_qn)
    return job.retries if job is not None else 0


def freeze_before_fork(**_: Any) -> None:
    """Celery ``worker_before_create_process`` receiver (in the parent, before each fork):
    move every object loaded so far out of the garbage collector's reach, so that the
    children's collections do not write to (and so copy) the pages they share with it.
    """
    gc.collect()
    gc.freeze()


def _configured_celery(registry: Registry, settings: Settings) -> Celery:
    default_queue = queue_name(settings.queue_prefix, "worker")
    # Its connections survive the broker going away (see ``broker_connection``).
    celery = Celery(f"asanoha.{settings.queue_prefix}", amqp=BrokerAMQP, set_as_current=False)
    celery.conf.update(
        broker_url=settings.broker_url,
        broker_transport_options=_transport_options(
            settings.broker_url,
            settings.visibility_timeout,
            JobPriorities.of(registry, settings.broker_url).used,
        ),
        broker_connection_retry_on_startup=True,
        task_default_queue=default_queue,
        task_default_exchange=default_queue,
        task_default_routing_key=default_queue,
        # Every queue declared up front, as Celery would declare it on first use: so that
        # commands working on "the app's queues" ('celery purge') see every one.
        task_queues=[
            _lane_queue(name, JobPriorities.of(registry, settings.broker_url).queue_arguments)
            for name in app_queues(settings)
        ],
        task_routes={
            **{job.qn: {"queue": queue_for_job(settings, job)} for job in registry.jobs},
            # The platform's tasks never share a queue with jobs (see ``lanes``).
            ADVANCE_TASK_NAME: {"queue": platform_queue(settings, "consumers")},
            CRON_TASK_NAME: {"queue": platform_queue(settings, "cron")},
            PRUNE_TASK_NAME: {"queue": platform_queue(settings, "cron")},
            PRUNE_EVENTS_TASK_NAME: {"queue": platform_queue(settings, "cron")},
        },
        # Remote control commands of one application never reach another's workers, and
        # its task and worker events reach only its own monitors (Flower), not another's.
        control_exchange=f"{settings.queue_prefix}.control",
        event_exchange=f"{settings.queue_prefix}.events",
        task_serializer="json",
        accept_content=["json"],
        task_ignore_result=True,
        # A message is acknowledged only when its task ended, and goes back to the queue
        # when the worker process dies mid-task; a worker takes one message at a time.
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        # Every state reaches Flower.
        worker_send_task_events=True,
        task_send_sent_event=True,
        enable_utc=True,
        timezone="UTC",
        beat_schedule=build_beat_schedule(registry, settings),
    )
    return celery


def _lane_queue(name: str, arguments: dict[str, Any] | None) -> Queue:
    exchange = Exchange(name, type="direct")  # type: ignore[no-untyped-call]
    return Queue(name, exchange, routing_key=name, queue_arguments=arguments)  # type: ignore[no-untyped-call]


def _transport_options(
    broker_url: str, visibility_timeout: float, priorities: bool = False
) -> dict[str, Any]:
    scheme = broker_url.split("://", 1)[0]
    if scheme == "memory":
        return {"polling_interval": MEMORY_POLLING_INTERVAL}
    if scheme.startswith("amqp") or scheme == "pyamqp":
        # Publishing waits for the broker's confirmation, so an outbox row is marked
        # published only once RabbitMQ holds the message.
        return {"confirm_publish": True}
    # The sweep that gives back the messages of a worker that died runs every
    # interval * throttle seconds (100 s by default): keep it a fraction of the visibility
    # timeout, so a crashed worker's job comes back soon after the timeout has passed.
    restore_interval = max(1, min(10, int(visibility_timeout / 4)))
    # Ten steps, one list per priority (kombu's default merges them into four).
    steps = {"priority_steps": list(range(10))} if priorities else {}
    return {
        **steps,
        "visibility_timeout": visibility_timeout,
        "unacked_restore_interval": restore_interval,
        "unacked_restore_throttle": 1,
        "socket_timeout": BROKER_SOCKET_TIMEOUT,
        "socket_connect_timeout": BROKER_SOCKET_TIMEOUT,
    }
