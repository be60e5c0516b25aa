"""``drain()``: wait until every job has settled; report the ones that failed for good."""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from amqp.exceptions import AMQPError
from kombu.exceptions import KombuError
from redis.exceptions import RedisError
from sqlalchemy import select

from asanoha.platform.consumers import (
    RunningPass,
    consumers_behind,
    describe_running,
    seconds_until_due,
)
from asanoha.platform.service.job_pauses import paused_job_qns
from asanoha.platform.service.outbox import count_paused_rows, count_unfinished
from asanoha.workers.lanes import app_queues
from asanoha.workers.pending import PendingWork

if TYPE_CHECKING:
    from asanoha.app import App

log = logging.getLogger("asanoha.drain")

#: Seconds between passes when no job outcome wakes the drain earlier.
POLL_INTERVAL = 0.005
#: Consecutive idle passes that end a drain. One is not enough: a message a worker is
#: taking off a queue is, for an instant, in neither the queue nor the reserved set.
IDLE_PASSES = 2
#: Seconds a pass may take before a timeout during it blames the broker or the database:
#: passes take milliseconds and follow each other, so a deadline often falls in one.
STALLED_PASS = 1.0


@dataclass(frozen=True)
class DrainSummary:
    """Job attempts that ended since the previous drain, by how they ended."""

    succeeded: int = 0
    failed: int = 0
    retried: int = 0
    #: Attempts that ended with ``JobCancelled`` (not failures).
    cancelled: int = 0
    #: Attempts that snoozed (ran again later, the attempt not spent).
    snoozed: int = 0
    #: Paused jobs whose rows wait for a resume, and how many: the drain did not wait
    #: for them.
    paused: Mapping[str, int] = field(default_factory=dict)


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


@dataclass(frozen=True)
class StepFailure:
    """A workflow step's job row that failed its final attempt: its run failed."""

    workflow_qn: str
    run_id: str
    step: str
    #: The item's index in a mapped step (``None``: an unmapped step).
    item: int | None
    error: str

    def describe(self) -> str:
        """``<workflow>: step '<step>'[ item N] failed (run <id>): <error>``."""
        item = "" if self.item is None else f" item {self.item}"
        return (
            f"{self.workflow_qn}: step {self.step!r}{item} failed (run {self.run_id}): {self.error}"
        )


class WorkflowFailedError(JobFailedError):
    """A workflow step failed for good since the previous drain, failing its run: names the
    workflow, the step and the item."""

    def __init__(
        self,
        failures: Sequence[JobFailure],
        summary: DrainSummary,
        steps: Sequence[StepFailure],
    ) -> None:
        super().__init__(failures, summary)
        self.steps = tuple(steps)
        lines = [step.describe() for step in self.steps]
        self.args = (f"{len(lines)} workflow step(s) failed:\n" + "\n".join(lines),)

    def __str__(self) -> str:
        return str(self.args[0])


#: What a pass raises when the broker does not answer: the drain asks again until its
#: deadline rather than end early with an error that is not a timeout.
BROKER_ERRORS: tuple[type[Exception], ...] = (OSError, KombuError, RedisError, AMQPError)


class DrainTimeoutError(AssertionError):
    """Work was still pending when the drain's timeout ran out."""

    def __init__(
        self,
        timeout: float,
        pending: PendingWork,
        *,
        stuck: bool = False,
        running: Sequence[RunningPass] = (),
    ) -> None:
        self.pending = pending
        self.running = tuple(running)
        stalled = " (its last pass did not finish: does the broker or database answer?)"
        passes = f"; {describe_running(running)}" if running else ""
        super().__init__(
            f"drain() timed out after {timeout:g} s{stalled if stuck else ''}; "
            f"still pending: {pending.describe()}{passes}"
        )


class Drainer:
    """Drains the jobs of one application; remembers which runs the last drain reported."""

    def __init__(self, app: App, *, poll_interval: float = POLL_INTERVAL) -> None:
        self._app = app
        self._jobs = app.celery_jobs
        self._poll_interval = poll_interval
        self._job_runs = app.service.tables.job_runs
        # A workflow's waits and approvals wait for an event or a person: a drain settles
        # without them (a test approves, appends the event or moves the clock, then drains).
        self._held = [
            job.qn
            for job in app.registry.jobs
            if job.workflow_step is not None and job.workflow_step.hold is not None
        ]
        # Passes run on this thread so that a broker that stops answering cannot hold the
        # caller past its deadline.
        self._passes = ThreadPoolExecutor(max_workers=1, thread_name_prefix="asanoha-drain")
        self._seen_run_id = self._latest_run_id()
        self._seen_failed_runs = self._failed_runs()

    def drain(self, timeout: float = 10.0) -> DrainSummary:
        """Return once two consecutive passes find nothing pending.

        Each pass advances the consumers, relays due job rows and counts pending work
        (queues, reserved messages, job rows pending or running, consumers behind); between
        passes it waits for the next job outcome or the poll interval. Raises
        ``JobFailedError`` naming every job that failed its final attempt since the previous
        drain (then forgets them), ``ConsumerDeadError`` naming a dead consumer, or
        ``DrainTimeoutError`` with what is still pending. It never waits past ``timeout``,
        even on a silent broker.
        """
        deadline = time.monotonic() + timeout
        idle = 0
        pending = PendingWork()
        #: The broker's error of the last pass it failed (``None``: it answered).
        unanswered: Exception | None = None
        while True:
            # Cleared before counting: an outcome during the count wakes the next wait at once.
            self._jobs.outcomes.changed.clear()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise DrainTimeoutError(
                    timeout, pending, stuck=unanswered is not None, running=self._running()
                ) from unanswered
            started = time.monotonic()
            pass_ = self._passes.submit(self._pass)
            try:
                pending = pass_.result(timeout=remaining)
            except FutureTimeout:
                stalled = time.monotonic() - started >= min(STALLED_PASS, timeout / 2)
                raise DrainTimeoutError(
                    timeout, pending, stuck=stalled, running=self._running()
                ) from None
            except BROKER_ERRORS as error:
                # The broker did not answer (a socket timeout, a refused connection): the
                # next pass asks again, until the deadline says it timed out.
                unanswered, idle = error, 0
                self._jobs.outcomes.changed.wait(min(self._poll_interval, remaining))
                continue
            unanswered = None
            idle = idle + 1 if pending.total == 0 else 0
            if idle >= IDLE_PASSES:
                return self._settle()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise DrainTimeoutError(timeout, pending, running=self._running())
            self._jobs.outcomes.changed.wait(min(self._wait(pending), remaining))

    def _wait(self, pending: PendingWork) -> float:
        """Seconds until the next pass: the poll interval, or, when all that is pending is
        consumers waiting for their next attempt at a failing event, until the first is due
        (a job outcome still wakes the drain earlier)."""
        if pending.total != len(pending.consumers):
            return self._poll_interval
        return seconds_until_due(pending.consumers, self._poll_interval)

    def _running(self) -> list[RunningPass]:
        consumers = self._app.consumers
        return consumers.running() if consumers else []

    def forget(self) -> None:
        """Forget every run seen so far (the tables were emptied: ids may start over)."""
        self._seen_run_id = self._latest_run_id()
        self._seen_failed_runs = self._failed_runs()

    def close(self) -> None:
        """Stop the pass thread (a pass stuck on the broker ends with its socket timeout)."""
        self._passes.shutdown(wait=False, cancel_futures=True)

    def _pass(self) -> PendingWork:
        consumers = self._app.consumers
        if consumers:
            # Their job-trigger deliveries become job rows, published right away.
            consumers.run_once()
        self._app.service.relay_outbox()
        queued, reserved = self._jobs.probe().count(app_queues(self._app.settings))
        tables = self._app.service.tables
        with self._app.database.connect() as conn:
            paused = paused_job_qns(conn, tables, self._app.service.job_lanes)
            unfinished = count_unfinished(conn, tables, paused, self._held)
        pending = PendingWork(queued, reserved, unfinished)
        if consumers:
            # Asked after the job count: events of a job that ended meanwhile show here.
            pending = replace(pending, consumers=tuple(consumers_behind(consumers)))
        return pending

    def _settle(self) -> DrainSummary:
        """Summarise the runs since the previous drain; raise for final failures.

        Runs are written by whichever worker ran the attempt, in the transaction that ended
        it on the job row; no row is pending or running now, so every run is committed.
        """
        runs = self._job_runs
        query = (
            select(runs.c.id, runs.c.job_qn, runs.c.task_id, runs.c.status, runs.c.error)
            .where(runs.c.id > self._seen_run_id)
            .order_by(runs.c.id)
        )
        tables = self._app.service.tables
        with self._app.database.connect() as conn:
            rows = conn.execute(query).all()
            paused = paused_job_qns(conn, tables, self._app.service.job_lanes)
            waiting = count_paused_rows(conn, tables, paused)
        if waiting:
            log.warning(
                "drain() did not wait for paused jobs: %s",
                ", ".join(f"{qn} ({rows} waiting)" for qn, rows in sorted(waiting.items())),
            )
        if rows:
            self._seen_run_id = max(row.id for row in rows)
        statuses = Counter(row.status for row in rows)
        summary = DrainSummary(
            succeeded=statuses["succeeded"],
            failed=statuses["failed"],
            retried=statuses["retrying"] + statuses["crashed"],
            cancelled=statuses["cancelled"],
            snoozed=statuses["snoozed"],
            paused=waiting,
        )
        failures = [
            JobFailure(row.job_qn, row.task_id, row.error or "")
            for row in rows
            if row.status == "failed"
        ]
        steps = self._step_failures(failures) if failures else []
        steps += self._runs_failed_since(steps)
        if steps:
            raise WorkflowFailedError(failures, summary, steps)
        if failures:
            raise JobFailedError(failures, summary)
        return summary

    def _failed_runs(self) -> set[str]:
        """The ids of the failed workflow runs."""
        runs = self._app.service.tables.workflow_runs
        with self._app.database.connect() as conn:
            found = conn.execute(select(runs.c.id).where(runs.c.state == "failed")).scalars()
            return {str(run_id) for run_id in found}

    def _runs_failed_since(self, reported: Sequence[StepFailure]) -> list[StepFailure]:
        """The runs that failed since the previous drain without a failed job row to tell
        (a step's ``map=`` raised), as step failures."""
        failed = self._failed_runs()
        new = failed - self._seen_failed_runs - {step.run_id for step in reported}
        self._seen_failed_runs = failed
        if not new:
            return []
        runs = self._app.service.tables.workflow_runs
        with self._app.database.connect() as conn:
            rows = conn.execute(
                select(runs).where(runs.c.id.in_([uuid.UUID(run_id) for run_id in new]))
            ).all()
        return [
            StepFailure(
                row.workflow_qn,
                str(row.id),
                row.failed_step or "?",
                row.failed_item,
                row.error or "",
            )
            for row in rows
        ]

    def _step_failures(self, failures: Sequence[JobFailure]) -> list[StepFailure]:
        """The failures that are workflow steps (of a declared workflow or of a canvas over
        declared jobs), with their run, step and item."""
        ids = []
        for failure in failures:
            with contextlib.suppress(ValueError):
                ids.append(uuid.UUID(failure.task_id))
        if not ids:
            return []
        tables = self._app.service.tables
        items, runs = tables.workflow_items, tables.workflow_runs
        with self._app.database.connect() as conn:
            rows = conn.execute(
                select(items.c.job_id, items.c.run_id, items.c.step, items.c.item)
                .add_columns(runs.c.workflow_qn)
                .join(runs, runs.c.id == items.c.run_id)
                .where(items.c.job_id.in_(ids))
            ).all()
        found = {str(row.job_id): row for row in rows}
        steps = []
        for failure in failures:
            row = found.get(failure.task_id)
            if row is None:
                continue
            job = self._app.registry.job(failure.job_qn)
            step = None if job is None else job.workflow_step
            mapped = step is not None and step.map is not None
            steps.append(
                StepFailure(
                    row.workflow_qn,
                    str(row.run_id),
                    row.step,
                    row.item if mapped else None,
                    failure.error,
                )
            )
        return steps

    def _latest_run_id(self) -> int:
        runs = self._job_runs
        with self._app.database.connect() as conn:
            latest = conn.execute(select(runs.c.id).order_by(runs.c.id.desc()).limit(1)).scalar()
        return int(latest or 0)
