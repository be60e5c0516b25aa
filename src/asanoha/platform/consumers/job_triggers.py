"""The built-in job-trigger consumer: enqueues the jobs declared ``on=<event QN>``."""

from __future__ import annotations

from asanoha.platform.consumers.context import ConsumerContext, platform_unit
from asanoha.platform.consumers.projections import projection_consumers
from asanoha.platform.model import ConsumerDef, Registry
from asanoha.platform.settings import Settings
from asanoha.platform.store import StoredEvent

JOB_TRIGGER_CONSUMER = "asanoha:consumer:job-triggers"


def trigger_jobs(event: StoredEvent, ctx: ConsumerContext) -> None:
    """Enqueue every job declared on ``event``'s type, for the event's tenant.

    The job row is written in the pass's transaction, and its idempotency key is
    (job QN, event id): a redelivered event (after a restart, say) never starts a job twice.
    """
    service, request = platform_unit(ctx)
    for job in service.registry.jobs_triggered_by(event.type):
        service.enqueue_job(
            job.qn,
            event.payload,
            ctx.system_user,
            parent=request,
            trigger_name=event.type,
            trigger_event_id=event.id,
            idempotency_key=f"{job.qn}@event:{event.id}",
            manual=False,
        )


def consumer_definitions(
    registry: Registry, job_trigger_partitions: int | None = None
) -> tuple[ConsumerDef, ...]:
    """The application's consumers, the consumers of its async projections, and last the
    job-trigger consumer when a job is ``on=`` an event (with ``job_trigger_partitions``
    partitions; default: the setting ``ASANOHA_JOB_TRIGGER_PARTITIONS``)."""
    declared = (*registry.consumers, *projection_consumers(registry))
    events = registry.job_trigger_events
    if not events:
        return declared
    if job_trigger_partitions is None:
        job_trigger_partitions = Settings().job_trigger_partitions
    trigger = ConsumerDef(
        qn=JOB_TRIGGER_CONSUMER,
        feature="asanoha",
        func=trigger_jobs,
        on=events,
        # Jobs are for what happens from now on; a new deployment does not replay history.
        start="now",
        partitions=job_trigger_partitions,
    )
    return (*declared, trigger)
