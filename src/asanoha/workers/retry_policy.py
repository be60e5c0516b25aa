"""Retry countdowns and the boot-time check that no delay outlives the visibility timeout."""

from __future__ import annotations

from collections.abc import Iterable

from asanoha.platform.errors import DefinitionError
from asanoha.platform.model import JobDef


def retry_countdown(job: JobDef, attempt: int) -> float:
    """Seconds to wait after the failed ``attempt`` (1-based) of ``job``.

    Computed from the job's ``Backoff`` and nothing else: Celery's ``retry_backoff`` adds
    full jitter, which could make the gap shorter than declared.
    """
    return job.backoff.countdown(attempt)


def check_job_limits(jobs: Iterable[JobDef], visibility_timeout: float) -> None:
    """Reject a job whose longest countdown or timeout exceeds the visibility timeout.

    On Redis a message held longer than the visibility timeout is delivered a second time,
    so such a job would run twice.
    """
    for job in jobs:
        longest = job.backoff.longest(job.retries)
        if longest > visibility_timeout:
            raise DefinitionError(
                f"{job.qn}: its longest retry countdown ({longest:g} s) exceeds the broker "
                f"visibility timeout ({visibility_timeout:g} s); lower the backoff (max=...) "
                "or raise ASANOHA_VISIBILITY_TIMEOUT"
            )
        if job.timeout is not None and job.timeout > visibility_timeout:
            raise DefinitionError(
                f"{job.qn}: timeout={job.timeout:g} s exceeds the broker visibility timeout "
                f"({visibility_timeout:g} s); lower the timeout or raise "
                "ASANOHA_VISIBILITY_TIMEOUT"
            )
