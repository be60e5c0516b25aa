"""A claim takes a row only once it is due (``not_before``): a copy of a snoozed attempt's
message (a redelivery, a duplicate publish, a look again) that comes early runs nothing,
and the row still runs at its time."""

from __future__ import annotations

import datetime as dt
import time
import uuid
from typing import Any

import pytest
from sqlalchemy import update

from asanoha import Concurrency, Snooze
from asanoha.platform.jobs.attempts import AttemptEnd, Claim, ClaimLimit, job_rows_for
from asanoha.platform.model import Feature, SessionUser
from asanoha.platform.service import OutboxMessage
from tests.integration.workers.conftest import job_rows, job_runs

ONCE = "due:job:once"
IN_TURN = "due:job:in-turn"
NAP = "due:job:nap"
#: Seconds the nap job snoozes its first attempt for.
NAP_SECONDS = 3.0


class Naps:
    """When the nap job started each time."""

    def __init__(self) -> None:
        self.calls: list[float] = []


def _feature(naps: Naps) -> Feature:
    feature = Feature("due")

    @feature.job("once", manual=True)
    def once(payload: dict[str, Any], ctx: Any) -> None:
        pass

    @feature.job("in-turn", manual=True, concurrency=Concurrency.sequential())
    def in_turn(payload: dict[str, Any], ctx: Any) -> None:
        pass

    @feature.job("nap", manual=True)
    def nap(payload: dict[str, Any], ctx: Any) -> Any:
        naps.calls.append(time.monotonic())
        return Snooze(NAP_SECONDS) if len(naps.calls) == 1 else None

    return feature


@pytest.mark.parametrize("database", ["postgres", "sqlite"])
@pytest.mark.parametrize("job", [ONCE, IN_TURN])
def test_a_snoozed_attempt_is_claimed_only_once_its_time_has_come(asanoha_stack, database, job):
    stack = asanoha_stack(features=[_feature(Naps())], database=database)
    rows = job_rows_for(stack.db, stack.tables)
    limit = ClaimLimit.of(stack.registry.job(job))
    row_id = stack.service.enqueue_job(job, {}, SessionUser.system("default"), publish=False)
    claim = rows.claim(row_id, 1, limit=limit)
    assert isinstance(claim, Claim)
    later = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=120)
    snooze = AttemptEnd("snoozed", "pending", not_before=later, relay_after=later, spent=False)
    assert rows.end(row_id, job, "default", 1, claim, snooze)
    [snoozed] = job_rows(stack)

    # Another copy of attempt 1's message arrives at once: it claims nothing, and the row
    # still waits for its time, unpublished, for the relay to send it then.
    early = rows.claim(row_id, 1, limit=limit)
    assert not isinstance(early, Claim)
    assert (early.state, early.attempt) == ("pending", 0)
    [row] = job_rows(stack)
    assert row == snoozed
    assert (row.state, row.published_at, row.relay_after) == ("pending", None, later)

    # Its time comes: the same attempt is claimed.
    outbox = stack.tables.outbox
    with stack.db.begin() as conn:
        past = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1)
        conn.execute(update(outbox).values(not_before=past, relay_after=past))
    assert isinstance(rows.claim(row_id, 1, limit=limit), Claim)
    rows.close()


@pytest.mark.parametrize("database", ["postgres", "sqlite"])
def test_a_published_row_a_copy_finds_early_is_left_for_the_relay_at_its_time(
    asanoha_stack, database
):
    stack = asanoha_stack(features=[_feature(Naps())], database=database)
    rows = job_rows_for(stack.db, stack.tables)
    row_id = stack.service.enqueue_job(ONCE, {}, SessionUser.system("default"), publish=False)
    claim = rows.claim(row_id, 1)
    assert isinstance(claim, Claim)
    later = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=120)
    snooze = AttemptEnd("snoozed", "pending", not_before=later, relay_after=later, spent=False)
    assert rows.end(row_id, ONCE, "default", 1, claim, snooze)
    # Its message was published with its countdown (the broker holds it until then).
    outbox = stack.tables.outbox
    with stack.db.begin() as conn:
        conn.execute(update(outbox).values(published_at=dt.datetime.now(dt.UTC)))

    # A copy comes early. Should it have been the row's only message after all (its
    # sender's clock ahead of this worker's), the relay sends the row once it is due and
    # the published message had its time to claim it.
    assert not isinstance(rows.claim(row_id, 1), Claim)
    [row] = job_rows(stack)
    assert (row.state, row.attempt, row.not_before, row.published_at) == (
        "pending",
        0,
        later,
        None,
    )
    assert row.relay_after > row.not_before
    rows.close()


@pytest.mark.parametrize("database", ["postgres", "sqlite"])
def test_an_early_copy_of_a_snoozed_attempts_message_does_not_run_it(asanoha_stack, database):
    naps = Naps()
    stack = asanoha_stack(features=[_feature(naps)], jobs=True, database=database)
    row_id = uuid.UUID(stack.dispatch_job(NAP, {}))
    # A copy of attempt 1's message, sent once its snooze is written: long before the
    # snooze is over. (Sent while the attempt still ran, the copy would find it running and
    # watch it until its time limit instead.)
    _wait_until_snoozed(stack)
    stack.app.celery_jobs.publisher.publish(OutboxMessage(row_id, NAP, attempt=1))
    stack.drain(timeout=30)
    first, second = naps.calls
    assert second - first >= NAP_SECONDS
    [row] = job_rows(stack)
    assert (row.id, row.state, row.attempt) == (row_id, "succeeded", 1)
    assert [(run.attempt, run.status) for run in job_runs(stack, NAP)] == [
        (1, "snoozed"),
        (1, "succeeded"),
    ]


def _wait_until_snoozed(stack: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while [run.status for run in job_runs(stack, NAP)] != ["snoozed"]:
        assert time.monotonic() < deadline, "the nap job's first attempt never snoozed"
        time.sleep(0.02)
