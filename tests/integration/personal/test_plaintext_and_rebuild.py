"""Without a master key (development) the same calls work on plain values; a rebuilt table
reads as the live one, forgotten values included."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import select

from asanoha import SessionUser
from asanoha.handlers import personal_data
from asanoha.platform.store import rebuild_projection
from asanoha.testing import TestUsers
from tests.integration.personal.features import RECEIVED, personal
from tests.integration.personal.test_forget import ALICE, BOB, customer_with_everything

ADMIN = TestUsers.admin
OFFICER = SessionUser.of("officer", ADMIN.tenant_id, ["SystemAdmin", "Admin"])


@pytest.fixture(params=["postgres", "sqlite"])
def plain(request: pytest.FixtureRequest, asanoha_stack: Callable[..., Any]) -> Any:
    RECEIVED.clear()
    return asanoha_stack(features=[personal], database=request.param, settings={"master_key": None})


@pytest.fixture(params=["postgres", "sqlite"])
def stack(request: pytest.FixtureRequest, asanoha_stack: Callable[..., Any]) -> Any:
    RECEIVED.clear()
    return asanoha_stack(features=[personal, personal_data.feature], database=request.param)


def test_without_a_master_key_values_are_stored_as_they_are(plain: Any) -> None:
    assert not plain.service.personal.encrypts
    alice = customer_with_everything(plain, ALICE, "alice-order")
    customer_with_everything(plain, BOB, "bob-order")
    row = plain.service.dispatch_query("personal:query:customer:detail", {"id": alice["id"]}, ADMIN)
    assert (row["email"], row["born"]) == (ALICE["email"], dt.date(1852, 5, 4))
    found = plain.http.query_ok(
        "personal:query:customer:list", {"filter": {"email": ALICE["email"]}}, ADMIN
    )["rows"]
    assert [r["id"] for r in found] == [alice["id"]]
    taken = plain.http.write_err(
        "personal:write:customer:create", {"email": ALICE["email"], "name": "x"}, ADMIN
    )
    assert (taken.http_status, taken.reason) == (409, "unique_violation")
    customers = plain.tables.entity("personal:customer")
    with plain.db.connect() as conn:
        assert ALICE["email"] in conn.execute(select(customers.c.email)).scalars().all()


def test_a_rebuilt_table_reads_as_the_live_one(stack: Any) -> None:
    alice = customer_with_everything(stack, ALICE, "alice-order")
    bob = customer_with_everything(stack, BOB, "bob-order")
    stack.http.write_ok(
        "personal-data:write:forget-subject",
        {"subject": alice["id"], "reason": "erasure request"},
        OFFICER,
    )

    def rows() -> list[Any]:
        listed: list[Any] = stack.service.dispatch_query(
            "personal:query:customer:list", {"sort": ["id"]}, ADMIN
        )["rows"]
        return listed

    live = rows()
    with stack.db.begin() as conn:
        rebuild_projection(conn, stack.tables, stack.registry.entity("personal:customer"))
    assert rows() == live
    by_id = {str(r["id"]): r for r in live}
    assert by_id[alice["id"]]["email"] == "[forgotten]"
    assert by_id[bob["id"]]["email"] == BOB["email"]
    found = stack.http.query_ok(
        "personal:query:customer:list", {"filter": {"email": BOB["email"]}}, ADMIN
    )["rows"]
    assert [r["id"] for r in found] == [bob["id"]]
