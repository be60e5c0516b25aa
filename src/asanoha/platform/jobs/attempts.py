"""Claims and ends of job attempts on the job row: what makes the row the record of truth.

A worker claims an attempt before running it, with one statement that also returns what the
job runs on; it writes the end of the attempt (the row's new state and the attempt's run
row) in one transaction before it acknowledges the message. Both are synchronous: a job
the worker ran is recorded before the broker forgets it.

Both are idempotent per delivery, so that they may be sent again when the connection died
(a database restart): the claim writes a token of its own onto the row, and a claim sent
again with the same token, or an end sent again by the same claimant, recognises the write
that committed before its reply was lost. Without it the second claim would find the row
running at this attempt, acknowledge the message unrun and leave the row running with no
message (until the relay's recovery, an hour later), and the second end would record the
run twice and skip the next attempt's publish.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import secrets
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from sqlalchemy import (
    Connection,
    Engine,
    Update,
    and_,
    bindparam,
    case,
    insert,
    null,
    or_,
    select,
    update,
)
from sqlalchemy.exc import DBAPIError

from asanoha.platform.jobs import clocks, control, guards, job_events, publishing, workflows
from asanoha.platform.jobs.clocks import (
    WAKE_LOST_AFTER,
    as_utc,
    due_by,
    relay_time,
)
from asanoha.platform.jobs.enqueue import sealed
from asanoha.platform.jobs.guards import lane_target
from asanoha.platform.jobs.key_locks import lock_keys
from asanoha.platform.jobs.message import OutboxMessage
from asanoha.platform.jobs.states import (
    CANCELLED,
    FAILED,
    PENDING,
    RUNNING,
    SUCCEEDED,
    WAITING_TOKEN,
)
from asanoha.platform.jobs.workflows import WorkflowLookup
from asanoha.platform.model import JobDef
from asanoha.platform.store import Database, Tables

#: Characters of an error text kept in the job row and its run row.
MAX_ERROR_LENGTH = 4000

RunStatus = Literal[
    "succeeded", "failed", "retrying", "crashed", "cancelled", "snoozed", "rate_limited"
]
T = TypeVar("T")
log = logging.getLogger("asanoha.jobs")


class JobRowsUnavailable(Exception):
    """The database did not take a claim or the end of an attempt."""


def new_claim_token() -> str:
    """A token for one delivery's claim (32 hex characters)."""
    return secrets.token_hex(16)


def once_more_after_disconnect(write: Callable[[], T]) -> T:
    """Run ``write``; again once if its pooled connection had died (database restarted):
    SQLAlchemy invalidates such a connection, and the next checkout opens a new one.
    ``write`` must be idempotent (the first try may have committed before the connection
    died). Raises ``JobRowsUnavailable`` when the database still fails, or refuses to open
    a connection."""
    try:
        try:
            return write()
        except DBAPIError as error:
            if not error.connection_invalidated:
                raise
        return write()
    except DBAPIError as error:
        raise JobRowsUnavailable(str(error)) from error


def describe_error(exc: BaseException) -> str:
    """The error text stored with a run and reported by ``drain()``."""
    return sanitize_error(f"{type(exc).__name__}: {exc}")


def sanitize_error(text: str) -> str:
    """``text`` as a database text column takes it: no NUL, no lone surrogate, bounded."""
    text = text.replace("\x00", "\\x00")
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    if len(text) > MAX_ERROR_LENGTH:
        text = text[: MAX_ERROR_LENGTH - 1] + "…"
    return text


@dataclass(frozen=True)
class Claim:
    """A claimed attempt: what the job runs on."""

    job_qn: str
    payload: dict[str, Any]
    headers: Mapping[str, Any]
    trigger_result: Any
    started_at: dt.datetime
    #: The token the claim wrote on the row (a delivery that ends a crashed attempt brings
    #: its own); the attempt's end writes it again and recognises itself by it.
    token: str | None = None
    #: For the end of a crashed attempt: the token of the lost claim, which the row must
    #: still carry ("" for a claim that wrote none). ``None``: the end of this claim.
    lost_token: str | None = None
    #: The row's priority: the next attempt's message carries it (``None``: its job's).
    priority: int | None = None

    @classmethod
    def of_lost(
        cls, job_qn: str, headers: Mapping[str, Any], started: dt.datetime, lost_token: str
    ) -> Claim:
        """The claim that ends a crashed attempt: a token of its own (this end, sent again
        after a lost reply, is recognised as written, and the lost process's late end is
        not), holding the attempt only while the row still carries the lost claim's token."""
        return cls(job_qn, {}, headers, None, started, new_claim_token(), lost_token=lost_token)

    @property
    def held_token(self) -> str:
        """The token the row carries while the attempt this end ends is running."""
        return self.lost_token if self.lost_token is not None else self.token or ""


@dataclass(frozen=True)
class Unclaimed:
    """Why a delivery was not claimed: the row as it stands (``state`` ``missing``: no row)."""

    state: str
    attempt: int
    job_qn: str | None = None
    headers: Mapping[str, Any] | None = None
    started_at: dt.datetime | None = None
    #: The token of the claim the row carries ("" for none).
    token: str = ""
    #: The claim left the row waiting itself, under its keys' locks: no ``park`` follows.
    waiting: bool = False
    #: The row waits for a later attempt time (``not_before``): this delivery came before
    #: it. The claim left the row to the relay for that time; nothing more to do.
    early: bool = False


@dataclass(frozen=True)
class AttemptEnd:
    """How an attempt ended, for the job row and its run row."""

    status: RunStatus
    #: The row's state afterwards: ``pending`` (another attempt follows), ``succeeded``,
    #: ``failed`` or ``cancelled``. A ``pending`` end of a row whose cancel was requested
    #: cancels it instead.
    state: str
    error: str | None = None
    #: For a next attempt: when it may start, and when the relay may publish it.
    not_before: dt.datetime | None = None
    relay_after: dt.datetime | None = None
    #: A snooze: the attempt is not spent, the next delivery runs the same attempt again.
    spent: bool = True
    #: What the attempt logged through ``ctx.log``, for its run row (see ``attempt_logs``).
    logs: str | None = None
    #: A workflow step's return value (JSON), stored sealed with its item.
    result: Any = None
    #: ``result`` is a ``keep_result=True`` job's: stored sealed beside its row.
    keep_result: bool = False

    def row_attempt(self, attempt: int) -> int:
        """The attempt the row records after this end of ``attempt``."""
        return attempt if self.spent else attempt - 1

    @classmethod
    def again_after(
        cls,
        status: RunStatus,
        countdown: float,
        *,
        by_broker: bool,
        error: str | None = None,
        spent: bool = True,
        logs: str | None = None,
    ) -> AttemptEnd:
        """An end that leaves the row pending for a delivery ``countdown`` seconds from now:
        the next attempt (a retry), or the same one again (``spent=False``: a snooze, a rate
        limit). ``by_broker``: the ender publishes it with its countdown (the relay leaves it
        ``RELAY_GRACE`` more); else it waits in the database for the relay."""
        not_before = clocks.now() + dt.timedelta(seconds=countdown)
        return cls(
            status,
            PENDING,
            error,
            not_before=not_before,
            relay_after=relay_time(not_before, by_broker=by_broker),
            spent=spent,
            logs=logs,
        )


@dataclass(frozen=True)
class ClaimLimit:
    """What a claim of a job's rows must find room for: one running attempt per key
    (``sequential``), at most ``max_per_tenant`` per tenant."""

    sequential: bool = False
    max_per_tenant: int | None = None

    @property
    def shape(self) -> tuple[bool, bool]:
        """Which keys the claim counts: (its ``sequential`` key, its tenant's slot)."""
        return self.sequential, self.max_per_tenant is not None

    @classmethod
    def of(cls, job: JobDef) -> ClaimLimit | None:
        """The limit of ``job``'s claims (``None``: none, the one-statement claim)."""
        if not job.claim_limited:
            return None
        return cls(job.concurrency.mode == "sequential", job.max_per_tenant)


@dataclass(frozen=True)
class WaitingRow:
    """A waiting row made due: the message that runs it."""

    id: uuid.UUID
    job_qn: str
    attempt: int
    priority: int | None


def woken_row(row: Any) -> WaitingRow:
    """The message of a row a wake returned (its id, job, attempt and priority): the
    attempt after the one it records."""
    return WaitingRow(uuid.UUID(str(row[0])), row[1], row[2] + 1, row[3])


class JobRows:
    """Claims and ends attempts on the job rows of one application, on either database.

    Each transition is one SQLAlchemy statement, built once (building a statement costs more
    than sending it). On Postgres, ``PostgresJobRows`` sends the claim and the end compiled
    from these same statements on a driver cursor of its own.

    ``wake_lost_after``: seconds after which the relay publishes a row left waiting for a
    busy key, should the end that frees the key not wake it (its worker died in between);
    the visibility timeout in a worker.
    """

    def __init__(
        self, database: Database, tables: Tables, *, wake_lost_after: float = WAKE_LOST_AFTER
    ) -> None:
        self._database = database
        self._tables = tables
        self._wake_lost_after = wake_lost_after
        #: The declared workflows (``None``: no step rows to end); set by the worker.
        self.workflow_of: WorkflowLookup | None = None
        #: Job rows of workflow steps that committed ends placed, by the ended row, until
        #: their ender takes them to publish (``take_started``).
        self._started: dict[uuid.UUID, list[OutboxMessage]] = {}
        self._started_lock = threading.Lock()
        outbox = tables.outbox
        # Neither the job nor its lane is paused (``asanoha jobs pause``).
        self._not_paused = guards.not_paused(
            outbox,
            tables.job_pauses,
            bindparam("claim_lane", type_=tables.job_pauses.c.target.type),
        )
        self._claim = self._claim_statement([self._not_paused])
        self._look = select(
            outbox.c.state,
            outbox.c.attempt,
            outbox.c.job_qn,
            outbox.c.headers,
            outbox.c.started_at,
            outbox.c.claim_token,
            outbox.c.not_before,
            outbox.c.published_at,
        ).where(outbox.c.id == bindparam("row_id"))
        # A delivery that came before the row's time leaves a published row to the relay
        # from then on: the message that was published (held by the broker until then)
        # claims it first; should this delivery have been that message after all (its
        # sender's clock ahead of this worker's by more than ``DUE_MARGIN``), the relay
        # sends the row when due instead of the row waiting, published, for a message
        # nobody holds. An unpublished row needs nothing: its relay time is its time.
        self._leave_until_due = (
            update(outbox)
            .where(
                outbox.c.id == bindparam("row_id"),
                guards.pending_at(outbox, bindparam("leave_attempt")),
                guards.not_due(outbox, bindparam("leave_due_by")),
                outbox.c.published_at.is_not(None),
            )
            .values(published_at=None, relay_after=bindparam("leave_relay_after"))
        )
        # Typed, so that each database reads them as the columns they compare with.
        end_state = bindparam("end_state", type_=outbox.c.state.type)
        end_now = bindparam("end_now", type_=outbox.c.finished_at.type)
        end_finished = bindparam("end_finished", type_=outbox.c.finished_at.type)
        # An operator asked the attempt to stop: no further attempt follows.
        cancelled_instead = and_(outbox.c.cancel_requested, end_state == PENDING)
        self._end = (
            update(outbox)
            .where(
                outbox.c.id == bindparam("row_id"),
                guards.running_under(outbox, bindparam("end_attempt"), bindparam("end_held")),
            )
            .values(
                state=case((cancelled_instead, CANCELLED), else_=end_state),
                attempt=bindparam("end_row_attempt"),
                last_error=bindparam("end_error"),
                finished_at=case((cancelled_instead, end_now), else_=end_finished),
                not_before=bindparam("end_not_before"),
                relay_after=bindparam("end_relay_after"),
                # The next attempt is not published yet; a finished row keeps the time its
                # last attempt was.
                published_at=case((end_state == PENDING, null()), else_=outbox.c.published_at),
                claim_token=bindparam("end_token"),
            )
        )
        # An end sent again after its reply was lost: the row left ``running`` at this
        # attempt and still carries the claimant's token.
        self._ended_by = select(outbox.c.id).where(
            outbox.c.id == bindparam("row_id"),
            outbox.c.state != RUNNING,
            outbox.c.attempt == bindparam("end_row_attempt"),
            outbox.c.claim_token == bindparam("end_token"),
        )
        self._record = insert(tables.job_runs)
        # The end's event on the row's stream (``job_events``), for the feed.
        self._end_event = job_events.end_event(
            tables, database.engine.dialect, job_events.row_state(tables)
        )
        # The keys a limited claim and a wake look up first.
        self._keys = select(outbox.c.concurrency_key, outbox.c.slot_key, outbox.c.created_at).where(
            outbox.c.id == bindparam("row_id")
        )
        # Built once per shape (which of the two keys the row holds), as the others are.
        self._limited_claims = {
            (key, slot): self._build_limited_claim(key, slot)
            for key in (False, True)
            for slot in (False, True)
        }
        # The wake of the oldest row waiting for each key of an ended row.
        self._wakes = {
            column: control.wake_of_key(
                outbox,
                column,
                bindparam("wake_relay_after"),
                bindparam("wake_published_at", type_=outbox.c.published_at.type),
            )
            for column in control.KEY_COLUMNS
        }
        self._park = (
            update(outbox)
            .where(
                outbox.c.id == bindparam("row_id"),
                guards.pending_at(outbox, bindparam("park_attempt")),
            )
            .values(
                published_at=None,
                relay_after=bindparam("park_again"),
                claim_token=WAITING_TOKEN,
            )
        )

    def _build_limited_claim(self, key: bool, slot: bool) -> Update:
        """The claim of a row whose running attempts must leave room: none of its key
        running and no older row of the key due (``key``), fewer than ``limit_max`` of its
        slot running (``slot``). The keys are the row's own columns (a row without one
        finds room): the statement needs nothing read before it but the keys' locks."""
        outbox = self._tables.outbox
        room = [self._not_paused]
        if key:
            room.append(guards.key_free(outbox, outbox.c.concurrency_key))
            # Enqueue order: no older row of the key is due before this one.
            room.append(
                guards.first_due_of_key(
                    outbox,
                    outbox.c.concurrency_key,
                    bindparam("claim_started"),
                    outbox.c.created_at,
                    outbox.c.id,
                )
            )
        if slot:
            room.append(guards.slot_free(outbox, outbox.c.slot_key, bindparam("limit_max")))
        return self._claim_statement(room)

    def _claim_statement(self, room: list[Any]) -> Update:
        """The claim: the row pending at an earlier attempt, due (its ``not_before`` come),
        with ``room`` for it (its job not paused, its keys' limits), or already claimed by
        this very claim (sent again after its reply was lost)."""
        outbox = self._tables.outbox
        return (
            update(outbox)
            .where(
                outbox.c.id == bindparam("row_id"),
                or_(
                    and_(
                        guards.pending_before(outbox, bindparam("claim_attempt")),
                        guards.due(outbox, bindparam("claim_due_by")),
                        *room,
                    ),
                    guards.claimed_by(outbox, bindparam("claim_attempt"), bindparam("claim_token")),
                ),
            )
            .values(
                state=RUNNING,
                attempt=bindparam("claim_attempt"),
                started_at=bindparam("claim_started"),
                claim_token=bindparam("claim_token"),
            )
            .returning(
                outbox.c.job_qn,
                outbox.c.payload,
                outbox.c.headers,
                outbox.c.trigger_result,
                outbox.c.priority,
            )
        )

    @property
    def _engine(self) -> Engine:
        return self._database.engine

    @property
    def _ends_engine(self) -> Engine:
        """The engine of an end's transaction (``PostgresJobRows``: one that does not wait
        for the WAL flush, as its one-statement end)."""
        return self._engine

    def claim(
        self,
        row_id: uuid.UUID,
        attempt: int,
        token: str | None = None,
        *,
        lane: str = "worker",
        limit: ClaimLimit | None = None,
    ) -> Claim | Unclaimed:
        """Claim ``attempt`` of the job row ``row_id``: it runs only if this returns a ``Claim``.

        The row must be pending with an earlier attempt, due (its ``not_before`` come,
        within ``DUE_MARGIN``), its job and ``lane`` not paused, and its key within
        ``limit`` (its job's ``sequential`` and ``max_per_tenant``), or running at this
        attempt under ``token`` (this delivery's claim, sent again; a new token by
        default); anything else (finished, running for another delivery, a later attempt,
        not due yet, waiting for a pause or a busy key, no row) is returned as
        ``Unclaimed`` for the caller to judge. A row not due yet is left to the relay for
        its time (``early``).
        """
        token = token or new_claim_token()
        started = clocks.now()
        if limit is not None:
            held = limit
            return once_more_after_disconnect(
                lambda: self._claim_limited(row_id, attempt, token, started, lane, held)
            )
        return once_more_after_disconnect(
            lambda: self._claim_once(row_id, attempt, token, started, lane)
        )

    def _claim_limited(
        self,
        row_id: uuid.UUID,
        attempt: int,
        token: str,
        started: dt.datetime,
        lane: str,
        limit: ClaimLimit,
    ) -> Claim | Unclaimed:
        """A claim that first counts the running attempts of the row's keys, under their
        locks: one transaction, so that two workers never both find the last slot free.

        A row that finds no room is left waiting in the same transaction, still under the
        locks, which ``wake`` takes too: the end of the attempt holding the key either
        committed before this claim counted (the claim finds the room) or wakes after the
        row waits. Left waiting after the locks were let go, the row could miss that wake
        and sit until the relay's recheck, its key idle."""
        with self._database.begin() as conn:
            keys = conn.execute(self._keys, {"row_id": row_id}).first()
            if keys is None:
                return Unclaimed("missing", 0)
            lock_keys(conn, [key for key in self._limited_keys(keys, limit) if key])
            values = {
                **self._claim_params(row_id, attempt, token, started, lane),
                "limit_max": limit.max_per_tenant,
            }
            row = conn.execute(self._limited_claims[limit.shape], values).first()
            if row is not None:
                return _claim_of(row, started, token)
            return self._wait_unclaimed(conn, row_id, attempt, started)

    def _wait_unclaimed(
        self, conn: Connection, row_id: uuid.UUID, attempt: int, started: dt.datetime
    ) -> Unclaimed:
        """The end of a limited claim that found no room, in its transaction and under its
        keys' locks: the row judged as found, and left waiting if its key is busy."""
        found = conn.execute(self._look, {"row_id": row_id}).first()
        unclaimed = self._judge_unclaimed(conn.execute, row_id, found, attempt, started)
        if unclaimed.state != PENDING or unclaimed.attempt >= attempt or unclaimed.early:
            return unclaimed
        conn.execute(self._park, self._park_values(row_id, unclaimed.attempt))
        return dataclasses.replace(unclaimed, token=WAITING_TOKEN, waiting=True)

    @staticmethod
    def _limited_keys(keys: Any, limit: ClaimLimit) -> list[str | None]:
        """The keys of the row ``keys`` that ``limit`` locks."""
        return [
            keys.concurrency_key if limit.sequential else None,
            keys.slot_key if limit.max_per_tenant is not None else None,
        ]

    def _claim_once(
        self, row_id: uuid.UUID, attempt: int, token: str, started: dt.datetime, lane: str
    ) -> Claim | Unclaimed:
        # One transaction (on SQLite its backend's write-locking one); Postgres sends this
        # claim on a cursor of its own (``PostgresJobRows``).
        with self._engine.begin() as conn:
            row = conn.execute(
                self._claim, self._claim_params(row_id, attempt, token, started, lane)
            ).first()
            if row is not None:
                return _claim_of(row, started, token)
            found = conn.execute(self._look, {"row_id": row_id}).first()
            return self._judge_unclaimed(conn.execute, row_id, found, attempt, started)

    @staticmethod
    def _claim_params(
        row_id: uuid.UUID, attempt: int, token: str, started: dt.datetime, lane: str
    ) -> dict[str, Any]:
        """The values of a claim's statement."""
        return {
            "row_id": row_id,
            "claim_attempt": attempt,
            "claim_started": started,
            "claim_due_by": due_by(started),
            "claim_token": token,
            "claim_lane": lane_target(lane),
        }

    def _judge_unclaimed(
        self,
        execute: Callable[[Any, Mapping[str, Any]], Any],
        row_id: uuid.UUID,
        found: Any,
        attempt: int,
        started: dt.datetime,
    ) -> Unclaimed:
        """The ``Unclaimed`` of a claim of ``attempt`` made at ``started`` that found the
        row ``found`` (its look, ``None``: no row); a row not due yet is left to the relay
        for its time (``_leave_until_due``, sent through ``execute``)."""
        unclaimed = _unclaimed(found)
        not_before = as_utc(found.not_before) if found is not None else None
        if (
            unclaimed.state != PENDING
            or unclaimed.attempt >= attempt
            or not_before is None
            or not_before <= due_by(started)
        ):
            return unclaimed
        if found.published_at is not None:
            execute(
                self._leave_until_due,
                {
                    "row_id": row_id,
                    "leave_attempt": unclaimed.attempt,
                    "leave_due_by": due_by(started),
                    "leave_relay_after": relay_time(not_before, by_broker=True),
                },
            )
        return dataclasses.replace(unclaimed, early=True)

    def look(self, row_id: uuid.UUID) -> Unclaimed:
        """The job row ``row_id`` as it stands, claimed by no one (``state`` ``missing``: no
        row). Raises ``JobRowsUnavailable`` when the database fails."""

        def read() -> Unclaimed:
            with self._engine.connect() as conn:
                return _unclaimed(conn.execute(self._look, {"row_id": row_id}).first())

        return once_more_after_disconnect(read)

    def end(
        self,
        row_id: uuid.UUID,
        job_qn: str,
        tenant_id: str | None,
        attempt: int,
        claim: Claim,
        end: AttemptEnd,
    ) -> bool:
        """Write the end of a running attempt and its run row, in one transaction.

        Returns whether this end holds the attempt (``False``: a redelivery already judged
        it crashed; the run row is written all the same). Idempotent for a claim with a
        token: sent again after a committed end, it returns ``True`` and writes nothing.
        """
        finished = clocks.now()
        return once_more_after_disconnect(
            lambda: self._end_once(row_id, job_qn, tenant_id, attempt, claim, end, finished)
        )

    def _end_once(
        self,
        row_id: uuid.UUID,
        job_qn: str,
        tenant_id: str | None,
        attempt: int,
        claim: Claim,
        end: AttemptEnd,
        finished: dt.datetime,
    ) -> bool:
        with self._ends_engine.begin() as conn:
            ended, started = self.end_in(
                conn, row_id, job_qn, tenant_id, attempt, claim, end, finished
            )
        # Committed: only now may their messages go out.
        self.stash_started(row_id, started)
        return ended

    def end_in(
        self,
        conn: Connection,
        row_id: uuid.UUID,
        job_qn: str,
        tenant_id: str | None,
        attempt: int,
        claim: Claim,
        end: AttemptEnd,
        finished: dt.datetime | None = None,
    ) -> tuple[bool, list[OutboxMessage]]:
        """``end``, in the caller's transaction on ``conn`` (``end``'s own, or a workflow
        step's, which holds the writes it made: they and its end commit together or not at
        all), at ``finished`` (default: now). Returns whether this end holds the attempt,
        and the messages of the step rows it placed, for the caller to ``stash_started``
        once it has committed."""
        finished = finished or clocks.now()
        started: list[OutboxMessage] = []
        ended = conn.execute(
            self._end, self._end_params(row_id, attempt, claim, end, finished)
        ).rowcount
        if not ended and claim.token is not None:
            again = conn.execute(
                self._ended_by,
                {
                    "row_id": row_id,
                    "end_row_attempt": end.row_attempt(attempt),
                    "end_token": claim.token,
                },
            ).first()
            if again is not None:
                return True, started
        conn.execute(
            self._record,
            self._run_values(row_id, job_qn, tenant_id, attempt, claim, end, finished),
        )
        if ended:
            conn.execute(
                self._end_event,
                {
                    "row_id": row_id,
                    **self._event_values(row_id, job_qn, tenant_id, attempt, claim, end, finished),
                },
            )
        if ended and end.keep_result and end.state == SUCCEEDED:
            conn.execute(
                insert(self._tables.job_results).values(
                    job_id=row_id, result=sealed(conn, end.result), created_at=finished
                )
            )
        if ended and self.ends_step(claim, end):
            assert self.workflow_of is not None
            # The step's end and what it starts commit with the end of its job row.
            started = workflows.step_ended(
                conn, self._tables, self.workflow_of, row_id, end.state, end.result, end.error
            )
        return bool(ended), started

    def stash_started(self, row_id: uuid.UUID, started: list[OutboxMessage]) -> None:
        """Keep the messages of the step rows a committed end of ``row_id`` placed, for
        ``take_started``."""
        if started:
            with self._started_lock:
                self._started[row_id] = started

    def take_started(self, row_id: uuid.UUID) -> list[OutboxMessage]:
        """The messages of the step rows the committed end of ``row_id`` placed (for its
        ender to publish; the relay sends them should it not)."""
        with self._started_lock:
            return self._started.pop(row_id, [])

    def ends_step(self, claim: Claim, end: AttemptEnd) -> bool:
        """Whether ``end`` ends an attempt of a workflow step's job row (its run reads it)."""
        return self.workflow_of is not None and workflows.in_a_run(claim.headers)

    @staticmethod
    def _end_params(
        row_id: uuid.UUID, attempt: int, claim: Claim, end: AttemptEnd, finished: dt.datetime
    ) -> dict[str, Any]:
        """The values of an end's statement (``_end``, ``_ended_by``)."""
        now_or_next = end.not_before or finished
        return {
            "row_id": row_id,
            "end_attempt": attempt,
            "end_row_attempt": end.row_attempt(attempt),
            "end_state": end.state,
            "end_error": end.error,
            "end_now": finished,
            "end_finished": None if end.state == PENDING else finished,
            "end_not_before": now_or_next,
            "end_relay_after": end.relay_after or now_or_next,
            "end_token": claim.token,
            "end_held": claim.held_token,
        }

    @staticmethod
    def _event_values(
        row_id: uuid.UUID,
        job_qn: str,
        tenant_id: str | None,
        attempt: int,
        claim: Claim,
        end: AttemptEnd,
        finished: dt.datetime,
    ) -> dict[str, Any]:
        """The values of the end's event (``job_events.end_event``), written at the end's
        own time."""
        headers = claim.headers if isinstance(claim.headers, Mapping) else {}
        return job_events.end_event_values(
            row_id, job_qn, tenant_id, attempt, end.status, headers, finished
        )

    @staticmethod
    def _run_values(
        row_id: uuid.UUID,
        job_qn: str,
        tenant_id: str | None,
        attempt: int,
        claim: Claim,
        end: AttemptEnd,
        finished: dt.datetime,
    ) -> dict[str, Any]:
        """The attempt's run row."""
        return {
            "job_qn": job_qn,
            "task_id": str(row_id),
            "tenant_id": tenant_id,
            "attempt": attempt,
            "status": end.status,
            "error": end.error,
            "started_at": claim.started_at,
            "finished_at": finished,
            "logs": end.logs,
        }

    def park(self, row_id: uuid.UUID, row_attempt: int) -> None:
        """Leave the pending row ``row_id`` (at ``row_attempt``), which a delivery found
        waiting for a pause or a busy key, unpublished: the end of the attempt that holds
        its key wakes it (``wake``), a resume makes a paused job's rows due; should that
        wake be lost, the relay publishes it after ``wake_lost_after`` seconds. A waiting
        row costs nothing while it waits: nothing polls it."""
        values = self._park_values(row_id, row_attempt)

        def write() -> None:
            with self._engine.begin() as conn:
                conn.execute(self._park, values)

        once_more_after_disconnect(write)

    def _park_values(self, row_id: uuid.UUID, row_attempt: int) -> dict[str, Any]:
        again = clocks.now() + dt.timedelta(seconds=self._wake_lost_after)
        return {"row_id": row_id, "park_attempt": row_attempt, "park_again": again}

    def wake(self, row_id: uuid.UUID) -> list[WaitingRow]:
        """After an attempt of the row ``row_id`` ended: the oldest row waiting for each of
        its keys, made due and marked published (its message is the caller's to publish,
        right after; one it fails to publish it marks failed, and the relay sends it)."""
        woken_values = self._woken_values()

        def write() -> list[WaitingRow]:
            with self._engine.begin() as conn:
                keys = conn.execute(self._keys, {"row_id": row_id}).first()
                if keys is None:
                    return []
                # A claim that found the key busy holds these locks until its row waits.
                lock_keys(conn, [key for key in (keys.concurrency_key, keys.slot_key) if key])
                values = {"row_id": row_id, **woken_values}
                return [
                    woken_row(row)
                    for column in control.KEY_COLUMNS
                    if getattr(keys, column)
                    for row in conn.execute(self._wakes[column], values)
                ]

        return once_more_after_disconnect(write)

    def end_and_wake(
        self,
        row_id: uuid.UUID,
        job_qn: str,
        tenant_id: str | None,
        attempt: int,
        claim: Claim,
        end: AttemptEnd,
    ) -> tuple[bool, list[WaitingRow]]:
        """``end``, then ``wake``: the end of an attempt of a job whose claims are limited by
        keys, with the rows that waited for them made due. Returns whether the end holds the
        attempt, and the woken rows (none when the wake failed: the relay sends them once
        ``WAKE_LOST_AFTER`` passed). Raises what ``end`` raises."""
        ended = self.end(row_id, job_qn, tenant_id, attempt, claim, end)
        return ended, self.wake_or_leave_to_relay(row_id, job_qn)

    def wake_or_leave_to_relay(self, row_id: uuid.UUID, job_qn: str) -> list[WaitingRow]:
        """``wake``; none when it failed (logged): the relay sends the rows that still wait
        once ``WAKE_LOST_AFTER`` passed."""
        try:
            return self.wake(row_id)
        except Exception:
            log.warning("%s %s: waking the rows waiting for its key failed; the relay sends "
                        "them", job_qn, row_id, exc_info=True)  # fmt: skip
            return []

    def mark_published(self, sent: list[OutboxMessage], failed: list[OutboxMessage]) -> None:
        """Mark the messages a worker published (a retry, a woken row, a started step) on
        their rows: ``publishing.mark_published``."""
        publishing.mark_published(self._database, self._tables, sent, failed)

    @staticmethod
    def _woken_values() -> dict[str, dt.datetime]:
        # The waker publishes the woken row itself, as the broker holds a countdown: the
        # relay's rule for a row published by someone else (``clocks.relay_time``).
        now = clocks.now()
        return {"wake_relay_after": relay_time(now, by_broker=True), "wake_published_at": now}

    def forget_inherited_connections(self, **_: Any) -> None:
        """After a fork: drop connections of the parent (see ``Database``)."""

    def close(self) -> None:
        """Release connections of its own."""

    def refuse(self, row_id: uuid.UUID, job_qn: str, attempt: int, error: str) -> None:
        """Record a delivery that must not run (no job row, no tenant) as failed for good."""
        now = clocks.now()
        outbox = self._tables.outbox
        with self._engine.begin() as conn:
            conn.execute(
                update(outbox)
                .where(outbox.c.id == row_id, outbox.c.state.in_((PENDING, RUNNING)))
                .values(
                    state=FAILED,
                    last_error=error,
                    finished_at=now,
                    attempt=attempt,
                    claim_token=None,
                )
            )
            conn.execute(
                self._record,
                {
                    "job_qn": job_qn,
                    "task_id": str(row_id),
                    "tenant_id": None,
                    "attempt": attempt,
                    "status": "failed",
                    "error": error,
                    "started_at": now,
                    "finished_at": now,
                },
            )


def _claim_of(row: Any, started: dt.datetime, token: str) -> Claim:
    """The ``Claim`` of a claim statement's returned row."""
    return Claim(
        row.job_qn,
        dict(row.payload),
        row.headers,
        row.trigger_result,
        started,
        token,
        priority=row.priority,
    )


def _unclaimed(found: Any) -> Unclaimed:
    if found is None:
        return Unclaimed("missing", 0)
    return Unclaimed(
        found.state,
        found.attempt,
        found.job_qn,
        found.headers,
        found.started_at,
        found.claim_token or "",
    )


def job_rows_for(
    database: Database, tables: Tables, *, wake_lost_after: float = WAKE_LOST_AFTER
) -> JobRows:
    """The claims and ends of ``database``'s dialect."""
    if database.dialect == "postgresql":
        from asanoha.platform.jobs.attempts_postgres import PostgresJobRows

        return PostgresJobRows(database, tables, wake_lost_after=wake_lost_after)
    return JobRows(database, tables, wake_lost_after=wake_lost_after)


def _no_workflow(qn: str) -> None:
    return None


def recover_lost_attempts(
    database: Database, tables: Tables, retries_of: Callable[[str], int], older_than: float
) -> int:
    """End attempts still ``running`` after ``older_than`` seconds as crashed; return how many.

    No live attempt runs that long (its time limit and the visibility timeout are shorter),
    so its end was lost: the message went with a broker that lost its data, or Postgres
    crashed before it flushed the end (claims and ends commit without waiting for the WAL
    flush). Like a crashed worker's attempt it counts: the next attempt follows through the
    relay, or the job fails when no retry is left.
    """
    outbox, runs = tables.outbox, tables.job_runs
    now = clocks.now()
    cutoff = now - dt.timedelta(seconds=older_than)
    query = (
        select(
            outbox.c.id,
            outbox.c.job_qn,
            outbox.c.attempt,
            outbox.c.headers,
            outbox.c.started_at,
            outbox.c.cancel_requested,
        )
        .where(outbox.c.state == RUNNING, outbox.c.started_at < cutoff)
        .limit(100)
        .with_for_update(skip_locked=True)
    )
    with database.begin() as conn:
        lost = conn.execute(query).all()
        for row in lost:
            error = sanitize_error(
                f"WorkerLostError: attempt {row.attempt} recorded no end within {older_than:g} s"
            )
            final = row.attempt > retries_of(row.job_qn)
            # An attempt an operator asked to stop gets no next one.
            state = FAILED if final else CANCELLED if row.cancel_requested else PENDING
            conn.execute(
                update(outbox)
                .where(outbox.c.id == row.id, outbox.c.state == RUNNING)
                .values(
                    state=state,
                    last_error=error,
                    finished_at=None if state == PENDING else now,
                    not_before=now,
                    relay_after=now,
                    published_at=None,
                    # A late end of the lost attempt must not take this end for its own.
                    claim_token=None,
                )
            )
            job_events.append_end_event(
                conn, tables, uuid.UUID(str(row.id)), "failed" if final else "crashed"
            )
            # A step's row that failed or was cancelled so ends its run (no step starts here:
            # only a success does that).
            workflows.step_ended(
                conn, tables, _no_workflow, uuid.UUID(str(row.id)), state, None, error
            )
            tenant = row.headers.get("tenant_id") if isinstance(row.headers, dict) else None
            conn.execute(
                insert(runs).values(
                    job_qn=row.job_qn,
                    task_id=str(row.id),
                    tenant_id=tenant if isinstance(tenant, str) else None,
                    attempt=row.attempt,
                    status="failed" if final else "crashed",
                    error=error,
                    started_at=row.started_at,
                    finished_at=now,
                )
            )
    return len(lost)
