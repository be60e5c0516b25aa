"""``ctx.load`` folds a stream's events, opened and upcast, into an aggregate's state, now or
as of a position or time; ``ctx.fetch_for_writing`` checks the handler's appends against the
version it read."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from sqlalchemy import func, select

from asanoha.platform.store import read_events
from tests.integration.aggregates.conftest import (
    ADMIN,
    load,
    new_account,
    store_old_deposit,
)
from tests.integration.aggregates.features import BETWEEN


def open_account(stack: Any, account: str) -> int:
    payload = {"account": account, "owner": "Ada Lovelace", "email": "ada@example.org"}
    return int(stack.http.write_ok("ledger:write:open", payload, ADMIN)["position"])


def move(stack: Any, verb: str, account: str, amount: int, note: str = "") -> int:
    payload = {"account": account, "amount": amount, "note": note}
    return int(stack.http.write_ok(f"ledger:write:{verb}", payload, ADMIN)["position"])


def read(stack: Any, account: str, **options: Any) -> Any:
    return stack.http.write_ok("ledger:write:read", {"account": account, **options}, ADMIN)


def test_load_folds_the_events_opened_and_in_their_newest_version(stack: Any) -> None:
    account = new_account()
    open_account(stack, account)
    move(stack, "deposit", account, 250, "gift")
    store_old_deposit(stack, account, 3)
    move(stack, "withdraw", account, 50)

    assert read(stack, account) == {
        "owner": "Ada Lovelace",
        "email": "ada@example.org",
        "balance": 500,
        "notes": ["gift", ""],
        "events": 4,
    }
    assert read(stack, account, aggregate="balance") == {
        "balance": 500,
        "email": "ada@example.org",
    }
    assert read(stack, new_account()) is None


def test_load_as_of_a_position_gives_the_state_at_that_position(stack: Any) -> None:
    account = new_account()
    other = new_account()
    opened = open_account(stack, account)
    first = move(stack, "deposit", account, 100)
    open_account(stack, other)
    between = move(stack, "deposit", other, 7)
    second = move(stack, "withdraw", account, 30)

    assert read(stack, account, as_of=opened - 1) is None
    assert read(stack, account, as_of=opened)["balance"] == 0
    assert read(stack, account, as_of=first)["balance"] == 100
    # A position of another stream's event: the state after this stream's last one before it.
    assert read(stack, account, as_of=between)["events"] == 2
    assert read(stack, account, as_of=second)["balance"] == 70
    assert read(stack, account, as_of=second + 100)["balance"] == 70


def test_load_as_of_a_time_gives_the_state_at_that_time(stack: Any) -> None:
    account = new_account()
    open_account(stack, account)
    move(stack, "deposit", account, 100)
    with stack.db.connect() as conn:
        last = read_events(conn, stack.tables, stream_id=account)[-1].created_at
    move(stack, "deposit", account, 5)

    assert load(stack, "account", account, as_of=last).state.balance == 100
    assert load(stack, "account", account).state.balance == 105
    before = last - dt.timedelta(days=1)
    assert load(stack, "account", account, as_of=before).state is None
    with pytest.raises(ValueError, match="aware datetime"):
        load(stack, "account", account, as_of=last.replace(tzinfo=None))


def test_appends_after_fetch_for_writing_follow_the_version_read(stack: Any) -> None:
    account = new_account()
    open_account(stack, account)
    move(stack, "deposit", account, 100)
    move(stack, "withdraw", account, 40)
    move(stack, "withdraw", account, 60)

    refused = stack.http.write("ledger:write:withdraw", {"account": account, "amount": 1}, ADMIN)
    assert refused.status_code == 422
    assert load(stack, "account-unsnapshotted", account).state.balance == 0
    assert load(stack, "account-unsnapshotted", account).version == 4


def test_a_concurrent_append_after_fetch_for_writing_is_a_version_conflict(
    asanoha_stack: Any,
) -> None:
    from tests.integration.aggregates.features import ledger

    # Two writers at once: the second commits from another connection while the first
    # holds its transaction (SQLite has one writer at a time, so Postgres only).
    stack = asanoha_stack(features=[ledger], database="postgres")
    account = new_account()
    open_account(stack, account)
    move(stack, "deposit", account, 100)
    BETWEEN.append(lambda: move(stack, "deposit", account, 1, "sneaked in"))
    try:
        refused = stack.http.write(
            "ledger:write:withdraw", {"account": account, "amount": 100}, ADMIN
        )
    finally:
        BETWEEN.clear()

    assert refused.status_code == 409
    error = refused.json()["error"]
    assert (error["code"], error["reason"]) == ("version_conflict", "version_conflict")
    assert (error["details"]["expected_version"], error["details"]["current_version"]) == (2, 3)
    events = stack.tables.events
    with stack.db.connect() as conn:
        types = conn.execute(
            select(events.c.type).where(events.c.stream_id == account).order_by(events.c.id)
        ).scalars()
        assert list(types) == [
            "ledger:event:opened",
            "ledger:event:deposited",
            "ledger:event:deposited",
        ]
        count = conn.execute(select(func.count()).select_from(stack.tables.snapshots)).scalar()
    assert count == 0
    assert load(stack, "account", account).state.balance == 101


def test_a_job_loads_an_aggregate_of_its_tenant(stack: Any) -> None:
    from asanoha.workers.job_context import JobContext, JobMeta

    account = new_account()
    open_account(stack, account)
    move(stack, "deposit", account, 70)
    job = stack.registry.job("ledger:job:statement")
    ctx = JobContext(stack.service, job, JobMeta(tenant_id=ADMIN.tenant_id), task_id="t", retries=0)
    assert job.func({"account": account}, ctx) == {"balance": 70, "email": "ada@example.org"}
    assert ctx.load("balance", account, as_of=0) is None
    other = JobContext(stack.service, job, JobMeta(tenant_id="another"), task_id="t", retries=0)
    assert other.load("account", account) is None
    with pytest.raises(LookupError, match="ledger:job:statement: no aggregate 'missing'"):
        ctx.load("missing", account)


@pytest.mark.parametrize("database", ["postgres", "sqlite"])
def test_a_workflow_step_loads_what_it_wrote_before_its_end_commits(
    asanoha_stack: Any, database: str
) -> None:
    from asanoha import SessionUser, StepContext
    from asanoha.platform.model import Feature
    from tests.integration.aggregates.features import ledger

    flow = Feature("tellers")
    teller = flow.workflow("deposit-and-read", manual=True)

    @teller.step("move")
    def move(payload: dict[str, Any], ctx: StepContext) -> int:
        account = payload["account"]
        teller = SessionUser.of("teller", ctx.tenant_id, ["Admin"])
        ctx.write_as(teller, "ledger:write:deposit", {"account": account, "amount": 40})
        # In the step's unit: the deposit is folded in, and SQLite needs no second writer.
        return int(ctx.load("ledger:account", account).balance)

    stack = asanoha_stack(features=[ledger, flow], jobs=True, database=database)
    account = new_account()
    opened = {"account": account, "owner": "Ada", "email": "ada@example.org"}
    stack.http.write_ok("ledger:write:open", opened, ADMIN)
    run_id = stack.app.workflows.start(
        "tellers:workflow:deposit-and-read", {"account": account}, ADMIN
    )
    stack.drain()
    assert stack.app.workflows.get(run_id).result == 40
