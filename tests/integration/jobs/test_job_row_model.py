"""The job row against a reference model: random sequences of the transitions of
``asanoha.platform.jobs`` (enqueue in each mode, claims and duplicate deliveries, ends,
crashes and their recovery, pause, resume, cancel, operator retry, prune, the clock moving
on), on Postgres and on SQLite, each step compared with what the model says.

The clock is ``clocks.now``, replaced by one the test moves: nothing sleeps.
"""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from sqlalchemy import delete, func, select

from asanoha import Concurrency
from asanoha.platform.errors import ConflictError
from asanoha.platform.jobs import clocks, control, enqueue, retention
from asanoha.platform.jobs.attempts import (
    AttemptEnd,
    Claim,
    ClaimLimit,
    job_rows_for,
    recover_lost_attempts,
)
from asanoha.platform.jobs.message import OutboxMessage
from asanoha.platform.jobs.states import CANCELLED, FAILED, PENDING, RUNNING, SUCCEEDED
from asanoha.platform.model import Feature
from asanoha.platform.service import job_pauses

TENANT = "default"
#: The visibility timeout of the model: an attempt running longer is lost.
LOST_AFTER = 600.0
RETRY_AFTER = 5.0
SNOOZE = 20.0
UNIQUE_FOR = 100.0
RETENTION = 50.0
MAX_PER_TENANT = 2

feature = Feature("model")


def _noop(payload: dict[str, Any], ctx: Any) -> None:
    return None


feature.job("par", manual=True, retries=1)(_noop)
feature.job("seq", manual=True, retries=1, concurrency=Concurrency.sequential(key=["k"]))(_noop)
feature.job("slot", manual=True, max_per_tenant=MAX_PER_TENANT)(_noop)
feature.job("skip", manual=True, concurrency=Concurrency.skip(key=["k"]))(_noop)
feature.job("uniq", manual=True, unique_for=UNIQUE_FOR)(_noop)
JOBS = ["par", "seq", "slot", "skip", "uniq"]


def qn(job: str) -> str:
    return f"model:job:{job}"


@dataclass
class Row:
    """What the model knows of one job row."""

    id: uuid.UUID
    job: str
    key: str
    created: tuple[dt.datetime, int]
    not_before: dt.datetime
    state: str = PENDING
    attempt: int = 0
    started: dt.datetime | None = None
    finished: dt.datetime | None = None
    cancel_requested: bool = False
    #: The claim of its running attempt (``None``: abandoned, its worker crashed).
    claim: Claim | None = None
    #: The finish times of its attempts' run rows (an operator's retry adds none here).
    runs: list[dt.datetime] = field(default_factory=list)


class JobRowMachine(RuleBasedStateMachine):
    """Drives the transitions on one database; the model is a dict of ``Row``s."""

    stack: Any = None

    def __init__(self) -> None:
        super().__init__()
        stack = self.stack
        self.db, self.tables, self.app = stack.db, stack.tables, stack.app
        with self.db.begin() as conn:
            for table in (self.tables.outbox, self.tables.job_runs, self.tables.job_pauses):
                conn.execute(delete(table))
        self.rows_api = job_rows_for(self.db, self.tables, wake_lost_after=LOST_AFTER)
        self.now = dt.datetime.now(dt.UTC).replace(microsecond=0)
        self.rows: dict[uuid.UUID, Row] = {}
        self.paused: set[str] = set()
        self.order = 0

    # The clock ---------------------------------------------------------------------------

    @rule(seconds=st.sampled_from([0.5, 3.0, 30.0, LOST_AFTER + 1]))
    def advance(self, seconds: float) -> None:
        self.now += dt.timedelta(seconds=seconds)

    # Enqueue -----------------------------------------------------------------------------

    @rule(job=st.sampled_from(JOBS), k=st.sampled_from(["a", "b"]), delay=st.sampled_from([0, 30]))
    def enqueue(self, job: str, k: str, delay: int) -> None:
        definition = self.app.registry.job(qn(job))
        message = OutboxMessage(
            id=uuid.uuid4(),
            job_qn=qn(job),
            payload={"k": k},
            headers={"tenant_id": TENANT},
            countdown=float(delay),
        )
        with self.db.begin() as conn:
            placed = enqueue.place(conn, self.tables, definition, message)
        key = k if job in ("seq", "skip") else ""
        expected = self.answering(job, key)
        if expected is not None:
            assert placed.job_id == expected.id
            return
        assert placed.job_id == message.id
        self.order += 1
        self.rows[message.id] = Row(
            message.id,
            job,
            key,
            (self.now, self.order),
            self.now + dt.timedelta(seconds=delay),
        )

    def answering(self, job: str, key: str, other_than: uuid.UUID | None = None) -> Row | None:
        """The model's row that answers an enqueue of ``job``'s ``key`` instead of a new one."""
        if job == "skip":
            live = (PENDING, RUNNING)
            since = None
        elif job == "uniq":
            live = (PENDING, RUNNING, SUCCEEDED)
            since = self.now - dt.timedelta(seconds=UNIQUE_FOR)
        else:
            return None
        found = [
            row
            for row in self.rows.values()
            if row.job == job
            and row.key == key
            and row.state in live
            and row.id != other_than
            and (since is None or row.created[0] >= since)
        ]
        return min(found, key=lambda row: (row.created[0], row.id), default=None)

    # Claims ------------------------------------------------------------------------------

    def claimable(self, row: Row, attempt: int) -> bool:
        if row.state != PENDING or row.attempt >= attempt or qn(row.job) in self.paused:
            return False
        if row.not_before > clocks.due_by(self.now):
            return False
        if row.job == "seq":
            same = [other for other in self.rows.values() if other.job == "seq"]
            same = [other for other in same if other.key == row.key and other is not row]
            if any(other.state == RUNNING for other in same):
                return False
            if any(
                other.state == PENDING
                and other.not_before <= self.now
                and (other.created[0], other.id) < (row.created[0], row.id)
                for other in same
            ):
                return False
        if row.job == "slot":
            running = [o for o in self.rows.values() if o.job == "slot" and o.state == RUNNING]
            if len(running) >= MAX_PER_TENANT:
                return False
        return True

    @precondition(lambda self: bool(self.rows))
    @rule(data=st.data(), copy=st.booleans())
    def deliver(self, data: st.DataObject, copy: bool) -> None:
        """A delivery of a row's next attempt, or (``copy``) a copy of its current one."""
        row = data.draw(st.sampled_from(sorted(self.rows.values(), key=lambda r: r.created)))
        attempt = row.attempt if copy and row.attempt > 0 else row.attempt + 1
        limit = ClaimLimit.of(self.app.registry.job(qn(row.job)))
        expected = self.claimable(row, attempt)
        got = self.rows_api.claim(row.id, attempt, lane="worker", limit=limit)
        assert isinstance(got, Claim) == expected, (row, attempt, got)
        if isinstance(got, Claim):
            # Never a run before its time.
            assert row.not_before <= clocks.due_by(self.now)
            row.state, row.attempt, row.started, row.claim = RUNNING, attempt, self.now, got

    # Ends --------------------------------------------------------------------------------

    def running(self) -> list[Row]:
        live = [row for row in self.rows.values() if row.state == RUNNING and row.claim]
        return sorted(live, key=lambda row: row.created)

    @precondition(lambda self: bool(self.running()))
    @rule(data=st.data(), how=st.sampled_from(["success", "error", "snooze", "cancel"]))
    def end(self, data: st.DataObject, how: str) -> None:
        row = data.draw(st.sampled_from(self.running()))
        assert row.claim is not None
        definition = self.app.registry.job(qn(row.job))
        attempt = row.attempt
        later = None
        if how == "success":
            end = AttemptEnd("succeeded", SUCCEEDED)
        elif how == "cancel":
            end = AttemptEnd("cancelled", CANCELLED)
        elif how == "error" and attempt > definition.retries:
            end = AttemptEnd("failed", FAILED, "error")
        elif how == "error":
            later = self.now + dt.timedelta(seconds=RETRY_AFTER)
            end = AttemptEnd("retrying", PENDING, "error", not_before=later, relay_after=later)
        else:
            later = self.now + dt.timedelta(seconds=SNOOZE)
            end = AttemptEnd("snoozed", PENDING, not_before=later, relay_after=later, spent=False)
        # As a worker ends it: a limited job's end wakes the rows waiting for its keys.
        if definition.claim_limited:
            held, _ = self.rows_api.end_and_wake(
                row.id, qn(row.job), TENANT, attempt, row.claim, end
            )
        else:
            held = self.rows_api.end(row.id, qn(row.job), TENANT, attempt, row.claim, end)
        assert held
        row.claim = None
        row.runs.append(self.now)
        row.attempt = end.row_attempt(attempt)
        if end.state == PENDING and row.cancel_requested:
            row.state, row.finished = CANCELLED, self.now
        elif end.state == PENDING:
            assert later is not None
            row.state, row.not_before = PENDING, later
        else:
            row.state, row.finished = end.state, self.now

    @precondition(lambda self: bool(self.running()))
    @rule(data=st.data())
    def crash(self, data: st.DataObject) -> None:
        """The worker running an attempt dies: nothing ends it but the recovery."""
        row = data.draw(st.sampled_from(self.running()))
        row.claim = None

    @rule()
    def recover(self) -> None:
        retries = {qn(job): self.app.registry.job(qn(job)).retries for job in JOBS}
        recover_lost_attempts(self.db, self.tables, retries.__getitem__, LOST_AFTER)
        cutoff = self.now - dt.timedelta(seconds=LOST_AFTER)
        outbox = self.tables.outbox
        with self.db.connect() as conn:
            stuck = conn.execute(
                select(outbox.c.id).where(outbox.c.state == RUNNING, outbox.c.started_at < cutoff)
            ).all()
        # No row is left running past the visibility timeout once the recovery ran.
        assert stuck == []
        for row in self.rows.values():
            if row.state != RUNNING or row.started is None or row.started >= cutoff:
                continue
            row.claim = None
            row.runs.append(self.now)
            if row.attempt > retries[qn(row.job)]:
                row.state, row.finished = FAILED, self.now
            elif row.cancel_requested:
                row.state, row.finished = CANCELLED, self.now
            else:
                row.state, row.not_before = PENDING, self.now

    # Operators ---------------------------------------------------------------------------

    @rule(job=st.sampled_from(JOBS), on=st.booleans())
    def pause_or_resume(self, job: str, on: bool) -> None:
        with self.db.begin() as conn:
            if on:
                job_pauses.pause(conn, self.tables, qn(job), "operator")
                self.paused.add(qn(job))
            else:
                job_pauses.resume(conn, self.tables, self.app.registry, qn(job))
                self.paused.discard(qn(job))

    @precondition(lambda self: any(r.state in (PENDING, RUNNING) for r in self.rows.values()))
    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        live = [r for r in self.rows.values() if r.state in (PENDING, RUNNING)]
        row = data.draw(st.sampled_from(sorted(live, key=lambda r: r.created)))
        with self.db.begin() as conn:
            control.cancel_job_row(conn, self.tables, row.id, row.state)
        if row.state == PENDING:
            row.state, row.finished = CANCELLED, self.now
        else:
            row.cancel_requested = True

    @precondition(lambda self: any(r.state == FAILED for r in self.rows.values()))
    @rule(data=st.data())
    def retry(self, data: st.DataObject) -> None:
        failed = sorted(
            (r for r in self.rows.values() if r.state == FAILED), key=lambda r: r.created
        )
        row = data.draw(st.sampled_from(failed))
        answering = self.answering(row.job, row.key, other_than=row.id)
        if answering is not None:
            with pytest.raises(ConflictError):
                self.app.jobs.retry(row.id, requested_by="operator")
            return
        self.app.jobs.retry(row.id, requested_by="operator")
        row.state, row.attempt, row.not_before = PENDING, 0, self.now
        row.started = row.finished = None
        row.cancel_requested = False

    @rule()
    def prune(self) -> None:
        before = self.now - dt.timedelta(seconds=RETENTION)
        with self.db.begin() as conn:
            retention.prune_finished(conn, self.tables, before)
        for row_id, row in list(self.rows.items()):
            if (
                row.state in (SUCCEEDED, FAILED, CANCELLED)
                and row.finished
                and row.finished < before
            ):
                del self.rows[row_id]
            else:
                row.runs = [finished for finished in row.runs if finished >= before]

    # Invariants --------------------------------------------------------------------------

    @invariant()
    def rows_match_the_model(self) -> None:
        outbox, runs = self.tables.outbox, self.tables.job_runs
        with self.db.connect() as conn:
            found = {
                uuid.UUID(str(row.id)): row
                for row in conn.execute(select(outbox.c.id, outbox.c.state, outbox.c.attempt)).all()
            }
            counted = dict(
                conn.execute(
                    select(runs.c.task_id, func.count())
                    .where(runs.c.status != "requeued")
                    .group_by(runs.c.task_id)
                ).all()
            )
        assert set(found) == set(self.rows)
        for row_id, row in self.rows.items():
            assert (found[row_id].state, found[row_id].attempt) == (row.state, row.attempt), row
            # Each ended attempt has exactly one run row.
            assert counted.get(str(row_id), 0) == len(row.runs), row
        running = [row for row in self.rows.values() if row.state == RUNNING]
        for key in ("a", "b"):
            assert len([r for r in running if r.job == "seq" and r.key == key]) <= 1
        assert len([r for r in running if r.job == "slot"]) <= MAX_PER_TENANT


@pytest.mark.parametrize("database", ["postgres", "sqlite"])
def test_the_job_row_follows_its_model(asanoha_stack, database, monkeypatch):
    stack = asanoha_stack(features=[feature], database=database)
    machine: Any = type("Machine", (JobRowMachine,), {"stack": stack})
    clock: list[JobRowMachine] = []
    original_init = machine.__init__

    def init(self: JobRowMachine) -> None:
        original_init(self)
        clock[:] = [self]

    machine.__init__ = init
    # The transitions read the machine's clock: no sleeping, and the same times on both
    # databases.
    monkeypatch.setattr(clocks, "now", lambda: clock[0].now)
    run = settings(
        max_examples=12,
        stateful_step_count=25,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )(machine)
    run.TestCase().runTest()
