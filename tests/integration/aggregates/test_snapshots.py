"""Snapshots: kept every N events, sealed like the events, used by ``load`` and equal to a
full fold; a snapshot of another aggregate version is ignored and taken again; after forget
no snapshot yields a plaintext value."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import func, insert, select, update

from asanoha import FORGOTTEN
from asanoha.platform.personal import cipher
from tests.integration.aggregates.conftest import (
    ADMIN,
    OFFICER,
    load,
    new_account,
    snapshot_rows,
    store_old_deposit,
)

OWNER = "Grace Hopper"
EMAIL = "grace.hopper@example.org"


def open_with_history(stack: Any, deposits: int) -> str:
    """An account opened with personal values, then ``deposits`` deposits."""
    account = new_account()
    stack.http.write_ok(
        "ledger:write:open", {"account": account, "owner": OWNER, "email": EMAIL}, ADMIN
    )
    for number in range(deposits):
        payload = {"account": account, "amount": number + 1, "note": f"n{number}"}
        stack.http.write_ok("ledger:write:deposit", payload, ADMIN)
    return account


def snapshot_text(stack: Any) -> str:
    """Every value of the snapshot table, as text."""
    table = stack.tables.snapshots
    with stack.db.connect() as conn:
        rows = conn.execute(select(table)).all()
    return json.dumps([[str(value) for value in row] for row in rows], ensure_ascii=False)


def test_a_snapshot_is_kept_after_n_events_and_load_folds_only_the_tail(stack: Any) -> None:
    account = open_with_history(stack, 6)
    first = load(stack, "account", account)
    assert (first.version, first.folded) == (7, 7)
    assert [row["stream_version"] for row in snapshot_rows(stack, account)] == [7]

    store_old_deposit(stack, account, 2)
    stack.http.write_ok("ledger:write:deposit", {"account": account, "amount": 3}, ADMIN)
    again = load(stack, "account", account)
    full = load(stack, "account-unsnapshotted", account)
    assert (again.version, again.folded) == (9, 2)
    assert vars(again.state) == vars(full.state)
    assert again.state.balance == 21 + 200 + 3
    # The fold function's snapshots (every 3) hold JSON states.
    assert load(stack, "balance", account).state == {"balance": 224, "email": EMAIL}
    assert load(stack, "balance", account).folded == 0
    assert load(stack, "account", account, as_of=0).state is None


def test_snapshots_hold_personal_values_sealed(stack: Any) -> None:
    account = open_with_history(stack, 5)
    assert load(stack, "account", account).state.email == EMAIL
    rows = snapshot_rows(stack, account)
    assert len(rows) == 1
    assert cipher.is_sealed(rows[0]["state"]["email"])
    assert cipher.is_sealed(rows[0]["state"]["owner"])
    assert EMAIL not in snapshot_text(stack) and OWNER not in snapshot_text(stack)
    assert load(stack, "account", account).state.email == EMAIL


def test_a_snapshot_of_another_aggregate_version_is_ignored_and_taken_again(stack: Any) -> None:
    account = open_with_history(stack, 5)
    load(stack, "account", account)
    table = stack.tables.snapshots
    with stack.db.begin() as conn:
        conn.execute(
            update(table)
            .where(table.c.stream_id == account)
            .values(aggregate_version="h:older-shape", state={"balance": -1})
        )

    loaded = load(stack, "account", account)
    assert (loaded.state.balance, loaded.folded) == (15, 6)
    [row] = snapshot_rows(stack, account)
    aggregate = stack.registry.find_aggregate("ledger:account")
    assert row["aggregate_version"] == aggregate.version
    assert row["state"]["balance"] == 15


def test_after_forget_snapshots_yield_forgotten_values_never_plaintext(stack: Any) -> None:
    account = open_with_history(stack, 5)
    load(stack, "account", account)
    [kept] = snapshot_rows(stack, account)

    stack.http.write_ok(
        "personal-data:write:forget-subject", {"subject": account, "reason": "erasure"}, OFFICER
    )
    # Forget discards the subject's own snapshots.
    assert snapshot_rows(stack, account) == []
    forgotten = load(stack, "account", account)
    assert forgotten.state.email is FORGOTTEN and forgotten.state.owner is FORGOTTEN
    # The new snapshot holds the forgotten mark, and is served as FORGOTTEN.
    [taken] = snapshot_rows(stack, account)
    assert taken["state"]["email"] == "[forgotten]"
    again = load(stack, "account", account)
    assert again.folded == 0 and again.state.email is FORGOTTEN
    assert EMAIL not in snapshot_text(stack) and OWNER not in snapshot_text(stack)

    # A snapshot kept before the forget (restored from a backup, say) no longer opens: it
    # is discarded, and the state folded from the events again.
    table = stack.tables.snapshots
    with stack.db.begin() as conn:
        conn.execute(table.delete().where(table.c.stream_id == account))
        conn.execute(insert(table).values(kept))
    restored = load(stack, "account", account)
    assert restored.folded == 6
    assert restored.state.email is FORGOTTEN and restored.state.owner is FORGOTTEN
    assert vars(restored.state) == vars(load(stack, "account-unsnapshotted", account).state)
    [retaken] = snapshot_rows(stack, account)
    assert retaken["state"]["owner"] == "[forgotten]"
    with stack.db.connect() as conn:
        assert conn.execute(select(func.count()).select_from(table)).scalar() == 1


def test_a_query_loads_an_aggregate_and_keeps_no_snapshot(stack: Any) -> None:
    """A query's transaction only reads (on Postgres a read-only one): its load folds the
    whole tail past the snapshot interval without writing a snapshot; a write's load then
    keeps one."""
    account = open_with_history(stack, 6)
    table = stack.tables.snapshots
    with stack.db.begin() as conn:
        conn.execute(table.delete())
    state = stack.http.query_ok("ledger:query:balance", {"account": account}, ADMIN)
    assert (state["balance"], state["email"], state["events"]) == (21, EMAIL, 7)
    assert snapshot_text(stack) == "[]"
    stack.http.write_ok("ledger:write:read", {"account": account}, ADMIN)
    assert snapshot_text(stack) != "[]"
    again = stack.http.query_ok("ledger:query:balance", {"account": account}, ADMIN)
    assert again == state
