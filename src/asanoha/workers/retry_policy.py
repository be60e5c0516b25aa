"""Retry decisions: which errors are retried, after how long, and whether the broker or the
database holds the wait; the boot-time check against the visibility timeout."""

from __future__ import annotations

from collections.abc import Iterable

from asanoha.platform.errors import AsanohaError, DefinitionError
from asanoha.platform.model import JobDef
from asanoha.platform.settings import Settings

#: Seconds a job over its soft ``timeout`` gets to unwind before the hard limit.
HARD_LIMIT_GRACE = 5.0
#: Seconds kept free below the visibility timeout, for the time a worker takes to pick a
#: message up and acknowledge it.
VISIBILITY_MARGIN = 1.0


def retry_countdown(job: JobDef, attempt: int) -> float:
    """Seconds to wait after the failed ``attempt`` (1-based) of ``job``.

    Computed from the job's ``Backoff`` and nothing else: Celery's ``retry_backoff`` adds
    full jitter, which could make the gap shorter than declared.
    """
    return job.backoff.countdown(attempt)


def is_retryable(job: JobDef, exc: BaseException) -> bool:
    """Whether ``exc`` may be retried: ``no_retry_on`` never, ``retry_on`` only those; by
    default anything but a 4xx ``AsanohaError`` (the same call would fail the same way)."""
    if job.no_retry_on and isinstance(exc, job.no_retry_on):
        return False
    if job.retry_on is not None:
        return isinstance(exc, job.retry_on)
    return not (isinstance(exc, AsanohaError) and 400 <= exc.http_status < 500)


def job_timeout(job: JobDef, settings: Settings) -> float:
    """Seconds an attempt of ``job`` may run: its ``timeout=`` or the platform default."""
    return job.timeout if job.timeout is not None else settings.job_timeout


def broker_countdown_limit(job: JobDef, settings: Settings) -> float:
    """The longest countdown the broker may hold for ``job``; longer waits stay in the database.

    Under late acks a retried message sits in Redis's ``unacked`` hash for its countdown and
    then for the run, so countdown + timeout + grace must stay below the visibility timeout,
    or Redis delivers it a second time.
    """
    room = (
        settings.visibility_timeout
        - job_timeout(job, settings)
        - HARD_LIMIT_GRACE
        - VISIBILITY_MARGIN
    )
    return max(0.0, min(settings.broker_countdown_max, room))


def check_job_limits(jobs: Iterable[JobDef], settings: Settings) -> None:
    """Reject a job whose run can outlive the visibility timeout (it would run twice)."""
    for job in jobs:
        timeout = job_timeout(job, settings)
        longest = timeout + HARD_LIMIT_GRACE + VISIBILITY_MARGIN
        if longest >= settings.visibility_timeout:
            source = "its timeout" if job.timeout is not None else "ASANOHA_JOB_TIMEOUT"
            raise DefinitionError(
                f"{job.qn}: {source} ({timeout:g} s) plus the hard-limit grace "
                f"({HARD_LIMIT_GRACE:g} s) and margin ({VISIBILITY_MARGIN:g} s) reaches the broker "
                f"visibility timeout ({settings.visibility_timeout:g} s), so a running attempt "
                "could be delivered twice; lower timeout= or raise ASANOHA_VISIBILITY_TIMEOUT"
            )
