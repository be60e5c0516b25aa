"""The hand-off of a sequential key from one attempt to the next: a delivery that finds the
key busy is waiting by the time its claim returns, so the end of the attempt holding the key
wakes it. Were it left waiting only after the claim's locks went, the end's wake could come
in between, find nothing waiting, and leave the key idle until the relay's recheck (seen
across a fleet as a ten-second stall of a sequential backlog)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from asanoha import Concurrency
from asanoha.platform.jobs.attempts import (
    WAITING_TOKEN,
    AttemptEnd,
    Claim,
    ClaimLimit,
    Unclaimed,
    job_rows_for,
)
from asanoha.platform.model import Feature


@pytest.mark.parametrize("database", ["postgres", "sqlite"])
def test_a_delivery_that_finds_its_key_busy_waits_before_its_claim_returns(asanoha_stack, database):
    feature = Feature("handoff")

    @feature.job("apply", manual=True, concurrency=Concurrency.sequential())
    def apply(payload: dict[str, Any], ctx: Any) -> None:
        pass

    stack = asanoha_stack([feature], database=database)
    qn = "handoff:job:apply"
    # Left to a relay that never runs here: the test delivers by claiming.
    first = stack.app.jobs.run(qn, {}, publish=False)
    second = stack.app.jobs.run(qn, {}, publish=False)
    rows = job_rows_for(stack.db, stack.tables)
    limit = ClaimLimit(sequential=True)

    running = rows.claim(first, 1, limit=limit)
    assert isinstance(running, Claim)
    busy = rows.claim(second, 1, limit=limit)
    assert isinstance(busy, Unclaimed) and busy.waiting
    outbox = stack.tables.outbox
    with stack.db.connect() as conn:
        row = conn.execute(select(outbox).where(outbox.c.id == second)).one()
    assert (row.state, row.attempt, row.claim_token, row.published_at) == (
        "pending",
        0,
        WAITING_TOKEN,
        None,
    )

    assert rows.end(first, qn, "default", 1, running, AttemptEnd("succeeded", "succeeded"))
    assert [woken.id for woken in rows.wake(first)] == [second]
    assert isinstance(rows.claim(second, 1, limit=limit), Claim)
