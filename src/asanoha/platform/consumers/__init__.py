"""Event consumers: durable cursors, gap-safe ordered delivery, the job-trigger consumer.

Driver-agnostic: ``Consumers.run_once()`` advances every consumer in-process; the Celery
driver in ``asanoha.workers`` calls it after commits and on a tick.
"""

from asanoha.platform.consumers.context import ConsumerContext
from asanoha.platform.consumers.cursors import Gap
from asanoha.platform.consumers.drain import (
    ConsumerDeadError,
    ConsumerDrainTimeoutError,
    consumers_behind,
    describe_behind,
    describe_running,
    drain_consumers,
    seconds_until_due,
)
from asanoha.platform.consumers.job_triggers import JOB_TRIGGER_CONSUMER, consumer_definitions
from asanoha.platform.consumers.operations import ConsumerStatus
from asanoha.platform.consumers.passes import PassResult
from asanoha.platform.consumers.registry import Consumers, Round, RunningPass
from asanoha.platform.consumers.wakes import Wake

__all__ = [
    "JOB_TRIGGER_CONSUMER",
    "ConsumerContext",
    "ConsumerDeadError",
    "ConsumerDrainTimeoutError",
    "ConsumerStatus",
    "Consumers",
    "Gap",
    "PassResult",
    "Round",
    "RunningPass",
    "Wake",
    "consumer_definitions",
    "consumers_behind",
    "describe_behind",
    "describe_running",
    "drain_consumers",
    "seconds_until_due",
]
