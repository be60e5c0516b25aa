"""Properties over random writes: snapshot and tail equal the full fold (events of two
versions among them), ``as_of`` equals the state at that position, and the fold of the
demo's note events equals the note table."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from asanoha import SessionUser
from asanoha.handlers.demo.features import notes
from asanoha.platform.personal.vault import reveal
from tests.integration.aggregates.conftest import (
    ADMIN,
    load,
    new_account,
    store_old_deposit,
)
from tests.integration.aggregates.features import note_history

#: Function-scoped stacks serve every example: each example writes streams of its own.
BOUNDED = settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
OPERATIONS = st.lists(
    st.one_of(
        st.tuples(st.just("deposit"), st.integers(1, 500)),
        st.tuples(st.just("old"), st.integers(1, 5)),
        st.tuples(st.just("withdraw"), st.integers(1, 300)),
        st.tuples(st.just("load"), st.just(0)),
    ),
    min_size=1,
    max_size=25,
)


def write(stack: Any, verb: str, payload: dict[str, Any]) -> int:
    return int(stack.service.dispatch_write(f"ledger:write:{verb}", payload, ADMIN)["position"])


def play(stack: Any, account: str, operations: list[tuple[str, int]]) -> list[tuple[int, dict]]:
    """Run ``operations`` on a new account; the position and full state after each write.
    Each ``load`` compares the snapshotted loads with the full fold there."""
    opened = {"account": account, "owner": "Ada", "email": "ada@example.org"}
    states = [(write(stack, "open", opened), {"balance": 0})]
    balance = 0
    for verb, amount in operations:
        if verb == "load":
            assert_snapshots_match(stack, account)
            continue
        if verb == "old":
            position = store_old_deposit(stack, account, amount).id
            balance += amount * 100
        elif verb == "withdraw" and amount > balance:
            continue
        else:
            position = write(stack, verb, {"account": account, "amount": amount, "note": "x"})
            balance += amount if verb == "deposit" else -amount
        states.append((position, vars(load(stack, "account-unsnapshotted", account).state)))
        assert states[-1][1]["balance"] == balance
    assert_snapshots_match(stack, account)
    return states


def assert_snapshots_match(stack: Any, account: str) -> None:
    full = load(stack, "account-unsnapshotted", account)
    snapshotted = load(stack, "account", account)
    assert vars(snapshotted.state) == vars(full.state)
    assert snapshotted.version == full.version
    # Once a load kept a snapshot, the next one folds fewer events than snapshot_every.
    assert load(stack, "account", account).folded < 5
    folded = load(stack, "balance", account).state
    assert folded == {"balance": full.state.balance, "email": full.state.email}


@BOUNDED
@given(operations=OPERATIONS)
def test_snapshot_and_tail_equal_the_full_fold(stack: Any, operations: list[Any]) -> None:
    play(stack, new_account(), operations)


@BOUNDED
@given(operations=OPERATIONS, data=st.data())
def test_as_of_a_position_equals_the_state_at_that_position(
    stack: Any, operations: list[Any], data: st.DataObject
) -> None:
    account = new_account()
    states = play(stack, account, operations)
    for position, state in data.draw(st.lists(st.sampled_from(states), max_size=4)):
        for name in ("account", "account-unsnapshotted"):
            at = load(stack, name, account, as_of=position)
            assert state.items() <= vars(at.state).items()


EDITOR = SessionUser.of("editor-a", ADMIN.tenant_id, ["Editor"])
NOTE_WRITES = st.lists(
    st.tuples(
        st.sampled_from(["create", "update", "delete", "restore"]),
        st.integers(0, 3),
        st.text(alphabet="abc xyz", min_size=1, max_size=12),
    ),
    min_size=1,
    max_size=40,
)


@pytest.fixture(params=["postgres", "sqlite"])
def notes_stack(request: pytest.FixtureRequest, asanoha_stack: Callable[..., Any]) -> Any:
    return asanoha_stack(features=[notes, note_history], database=request.param)


@BOUNDED
@given(writes=NOTE_WRITES)
def test_the_fold_of_note_events_equals_the_note_table(
    notes_stack: Any, writes: list[tuple[str, int, str]]
) -> None:
    stack = notes_stack
    rows: dict[int, dict[str, Any]] = {}
    for verb, which, text in writes:
        row = rows.get(which)
        if verb == "create":
            rows[which] = {**dispatch(stack, "create", {"title": text, "body": f"{text} body"})}
        elif row is None:
            continue
        elif verb == "update" and not row["deleted"]:
            changes = {"title": text, "body": None if "x" in text else text}
            payload = {"id": row["id"], "version": row["version"], "changes": changes}
            rows[which] = {**dispatch(stack, "update", payload), "deleted": False}
        elif verb in ("delete", "restore") and row["deleted"] == (verb == "restore"):
            dispatch(stack, verb, {"id": row["id"]})
            rows[which] = {**row, "deleted": verb == "delete", "version": row["version"] + 1}

    table = stack.tables.entity("notes:note")
    aggregate = stack.registry.find_aggregate("note-history:note")
    with stack.db.begin() as conn:
        for row in rows.values():
            stored = conn.execute(select(table).where(table.c.id == uuid.UUID(str(row["id"]))))
            expected = reveal(conn, dict(stored.mappings().one()))
            folded = stack.service.aggregates.load(
                conn, aggregate, tenant_id=EDITOR.tenant_id, stream_id=str(row["id"])
            ).state
            assert folded is not None
            for name in ("title", "body", "version", "is_deleted"):
                assert folded.get(name) == expected[name], name


def dispatch(stack: Any, verb: str, payload: dict[str, Any]) -> dict[str, Any]:
    result = stack.service.dispatch_write(f"notes:write:note:{verb}", payload, EDITOR)
    return {"id": result["id"], "version": result["version"], "deleted": False}
