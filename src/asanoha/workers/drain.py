"""``drain()``: wait until every job has settled; report the ones that failed for good."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from sqlalchemy import select

from asanoha.platform.consumers import consumers_behind
from asanoha.workers.outcomes import outcomes_of
from asanoha.workers.pending import PendingWork, count_pending_jobs
from asanoha.workers.run_records import recorder_of

if TYPE_CHECKING:
    from asanoha.app import App

#: Seconds between passes when no job outcome wakes the drain earlier.
POLL_INTERVAL = 0.005
#: Consecutive idle passes that end a drain. One is not enough: a message a worker is
#: taking off a queue is, for an instant, in neither the queue nor the reserved set.
IDLE_PASSES = 2


@dataclass(frozen=True)
class DrainSummary:
    """Job attempts that ended since the previous drain, by how they ended."""

    succeeded: int = 0
    failed: int = 0
    retried: int = 0


@dataclass(frozen=True)
class JobFailure:
    """A job that failed its final attempt."""

    job_qn: str
    task_id: str
    error: str


class JobFailedError(AssertionError):
    """Jobs failed their final attempt since the previous drain (an assertion, so pytest
    shows the message as the test failure)."""

    def __init__(self, failures: Sequence[JobFailure], summary: DrainSummary) -> None:
        self.failures = tuple(failures)
        self.summary = summary
        lines = [f"{f.job_qn}: {f.error}" for f in self.failures]
        super().__init__(f"{len(lines)} job(s) failed:\n" + "\n".join(lines))


class DrainTimeoutError(AssertionError):
    """Work was still pending when the drain's timeout ran out."""

    def __init__(self, timeout: float, pending: PendingWork) -> None:
        self.pending = pending
        super().__init__(
            f"drain() timed out after {timeout:g} s; still pending: {pending.describe()}"
        )


class Drainer:
    """Drains the jobs of one application; remembers which runs the last drain reported."""

    def __init__(self, app: App, *, poll_interval: float = POLL_INTERVAL) -> None:
        self._app = app
        self._poll_interval = poll_interval
        self._outcomes = outcomes_of(app.celery)
        self._job_runs = app.service.tables.job_runs
        self._seen_run_id = self._latest_run_id()

    def drain(self, timeout: float = 10.0) -> DrainSummary:
        """Return once two consecutive passes find nothing pending.

        Each pass advances the consumers, relays the outbox and counts pending work (consumers
        behind included); between passes it waits for the next job outcome or the poll
        interval. Raises ``JobFailedError`` naming every job that failed its final attempt
        since the previous drain (then forgets them), ``ConsumerDeadError`` naming a dead
        consumer, or ``DrainTimeoutError`` with what is still pending.
        """
        deadline = time.monotonic() + timeout
        idle = 0
        while True:
            # Cleared before counting: an outcome during the count wakes the next wait at once.
            self._outcomes.changed.clear()
            consumers = self._app.consumers
            if consumers:
                # Their job-trigger deliveries become outbox rows, published right away.
                consumers.run_once()
            self._app.service.relay_outbox()
            pending = count_pending_jobs(self._app)
            if consumers:
                # Asked after the job count: events of a job that ended meanwhile show here.
                pending = replace(pending, consumers=tuple(consumers_behind(consumers)))
            idle = idle + 1 if pending.total == 0 else 0
            if idle >= IDLE_PASSES:
                self._flush_run_rows(deadline)
                return self._settle()
            if time.monotonic() >= deadline:
                raise DrainTimeoutError(timeout, pending)
            self._outcomes.changed.wait(self._poll_interval)

    def _flush_run_rows(self, deadline: float) -> None:
        # Run rows are written behind the jobs; the ones of jobs that just ended may not be
        # in the table yet.
        recorder = recorder_of(self._app.celery)
        if recorder is not None:
            recorder.flush(max(deadline - time.monotonic(), 1.0))

    def _settle(self) -> DrainSummary:
        """Summarise the runs since the previous drain; raise for final failures."""
        runs = self._job_runs
        query = (
            select(runs.c.id, runs.c.job_qn, runs.c.task_id, runs.c.status, runs.c.error)
            .where(runs.c.id > self._seen_run_id)
            .order_by(runs.c.id)
        )
        with self._app.database.connect() as conn:
            rows = conn.execute(query).all()
        if rows:
            self._seen_run_id = max(row.id for row in rows)
        statuses = Counter(row.status for row in rows)
        summary = DrainSummary(
            succeeded=statuses["succeeded"],
            failed=statuses["failed"],
            retried=statuses["retrying"],
        )
        failures = [
            JobFailure(row.job_qn, row.task_id, row.error or "")
            for row in rows
            if row.status == "failed"
        ]
        if failures:
            raise JobFailedError(failures, summary)
        return summary

    def _latest_run_id(self) -> int:
        runs = self._job_runs
        with self._app.database.connect() as conn:
            latest = conn.execute(select(runs.c.id).order_by(runs.c.id.desc()).limit(1)).scalar()
        return int(latest or 0)
