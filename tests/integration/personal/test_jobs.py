"""A job gets the personal values of its row opened; its job and run rows hold none."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import select

from asanoha.platform.personal import FORGOTTEN
from asanoha.platform.service.erasure import forget_subject
from asanoha.testing import TestUsers
from tests.integration.personal.features import WELCOMED, personal
from tests.integration.personal.scan import hits
from tests.integration.personal.test_forget import ALICE

ADMIN = TestUsers.admin


@pytest.fixture(params=["postgres", "sqlite"])
def stack(request: pytest.FixtureRequest, asanoha_stack: Callable[..., Any]) -> Any:
    WELCOMED.clear()
    return asanoha_stack(features=[personal], jobs=True, database=request.param)


def create_alice(stack: Any) -> dict[str, Any]:
    row: dict[str, Any] = stack.http.write_ok(
        "personal:write:customer:create",
        {"email": ALICE["email"], "name": ALICE["name"], "plan": "p"},
        ADMIN,
    )
    return row


def test_a_job_reads_the_values_its_row_holds_sealed(stack: Any) -> None:
    create_alice(stack)
    stack.drain()
    # The follow-up job the welcome job enqueued (in a transaction of its own) got the e-mail
    # opened too, and its job row holds it sealed (checked below).
    assert [(ALICE["email"], ALICE["email"]), (ALICE["email"], None)] == WELCOMED
    assert hits(stack, [ALICE["email"], ALICE["name"]]) == []


def test_a_job_of_a_forgotten_row_reads_forgotten(stack: Any) -> None:
    alice = create_alice(stack)
    stack.drain()
    outbox = stack.tables.outbox
    with stack.db.connect() as conn:
        payload, result = conn.execute(
            select(outbox.c.payload, outbox.c.trigger_result).where(
                outbox.c.job_qn == "personal:job:welcome"
            )
        ).one()
    with stack.service.unit_of_work(ADMIN) as request:
        forget_subject(
            request,
            stack.service.personal,
            tenant_id=ADMIN.tenant_id,
            subject=alice["id"],
            by="test",
            reason="erasure request",
        )
    # What a later attempt (a retry, a run again by an operator) is given.
    personal, engine = stack.service.personal, stack.db.engine
    assert personal.reveal_detached(engine, payload)["email"] is FORGOTTEN
    assert personal.reveal_detached(engine, result)["email"] is FORGOTTEN
