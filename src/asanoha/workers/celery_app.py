"""``make_celery``: the Celery application of an asanoha application."""

from __future__ import annotations

import gc
from typing import TYPE_CHECKING, Any

from celery import Celery, signals

from asanoha.workers.beat import build_beat_schedule
from asanoha.workers.consumer_tick import add_consumer_tick
from asanoha.workers.consumer_wake import register_advance_task
from asanoha.workers.job_task import register_job_task
from asanoha.workers.lanes import queue_for_job, queue_name
from asanoha.workers.outbox_publisher import CeleryOutboxPublisher, register_relay_task
from asanoha.workers.outcomes import attach_outcomes
from asanoha.workers.redaction import personal_keys
from asanoha.workers.retry_policy import check_job_limits
from asanoha.workers.run_records import RunRecorder, attach_recorder, recorder_of

if TYPE_CHECKING:
    from asanoha.app import App

#: The in-memory transport polls once a second by default: about a second per job.
MEMORY_POLLING_INTERVAL = 0.005


def make_celery(app: App) -> Celery:
    """One task per job (named by its QN, routed to its lane's queue), the relay task, the
    consumers' advance task and worker tick, the beat schedule, and the outbox publisher
    connected to the service.

    Raises ``DefinitionError`` for a job whose delays outlive the visibility timeout or whose
    cron expression does not parse.
    """
    settings = app.settings
    registry = app.registry
    check_job_limits(registry.jobs, settings.visibility_timeout)
    default_queue = queue_name(settings.queue_prefix, "worker")
    celery = Celery(f"asanoha.{settings.queue_prefix}", set_as_current=False)
    celery.conf.update(
        broker_url=settings.broker_url,
        broker_transport_options=_transport_options(
            settings.broker_url, settings.visibility_timeout
        ),
        broker_connection_retry_on_startup=True,
        task_default_queue=default_queue,
        task_default_exchange=default_queue,
        task_default_routing_key=default_queue,
        task_routes={job.qn: {"queue": queue_for_job(settings, job)} for job in registry.jobs},
        # Remote control commands of one application never reach another's workers.
        control_exchange=f"{settings.queue_prefix}.control",
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
    recorder = RunRecorder(app.database, app.service.tables)
    attach_recorder(celery, recorder)
    # Weak: an application that is gone takes its receiver with it.
    signals.worker_process_shutdown.connect(recorder.flush_before_exit, weak=True)
    signals.worker_process_init.connect(app.database.forget_inherited_connections, weak=True)
    signals.worker_before_create_process.connect(freeze_before_fork, weak=False)
    keys = {job.qn: personal_keys(registry, job) for job in registry.jobs}
    for job in registry.jobs:
        register_job_task(
            celery,
            app.service,
            job,
            recorder=recorder,
            personal_keys=keys[job.qn],
            default_tenant=settings.default_tenant,
        )
    register_relay_task(celery, app.service)
    if app.consumers:
        register_advance_task(celery, app.consumers)
        if settings.consumer_tick_interval > 0:
            add_consumer_tick(celery, app.consumers, settings.consumer_tick_interval)
    attach_outcomes(celery)

    def route(job_qn: str) -> str:
        job = registry.job(job_qn)
        return queue_for_job(settings, job) if job is not None else default_queue

    app.service.publisher = CeleryOutboxPublisher(celery, route, keys)
    return celery


def freeze_before_fork(**_: Any) -> None:
    """Celery ``worker_before_create_process`` receiver (in the parent, before each fork):
    move every object loaded so far out of the garbage collector's reach, so that the
    children's collections do not write to (and so copy) the pages they share with it.
    """
    gc.collect()
    gc.freeze()


def close_worker_resources(celery: Celery) -> None:
    """Release what ``make_celery`` opened besides the broker pool: the run-row writer."""
    recorder = recorder_of(celery)
    if recorder is not None:
        recorder.close()


def _transport_options(broker_url: str, visibility_timeout: float) -> dict[str, Any]:
    scheme = broker_url.split("://", 1)[0]
    if scheme == "memory":
        return {"polling_interval": MEMORY_POLLING_INTERVAL}
    if scheme.startswith("amqp") or scheme == "pyamqp":
        # Publishing waits for the broker's confirmation, so an outbox row is marked
        # published only once RabbitMQ holds the message.
        return {"confirm_publish": True}
    return {"visibility_timeout": visibility_timeout}
