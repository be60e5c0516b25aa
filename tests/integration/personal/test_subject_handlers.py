"""The bundled personal-data handlers: forget a subject, export what is held for one."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from asanoha.handlers import personal_data
from asanoha.platform.model import SessionUser
from asanoha.testing import TestUsers
from tests.integration.personal.features import RECEIVED, personal
from tests.integration.personal.scan import hits
from tests.integration.personal.test_forget import ALICE, BOB, customer_with_everything

OFFICER = SessionUser.of("officer", TestUsers.admin.tenant_id, ["SystemAdmin", "Admin"])


@pytest.fixture(params=["postgres", "sqlite"])
def stack(request: pytest.FixtureRequest, asanoha_stack: Callable[..., Any]) -> Any:
    RECEIVED.clear()
    return asanoha_stack(features=[personal, personal_data.feature], database=request.param)


def test_export_lists_every_value_held_for_the_subject_and_where(stack: Any) -> None:
    alice = customer_with_everything(stack, ALICE, "alice-order")
    customer_with_everything(stack, BOB, "bob-order")
    stack.consumers.run_once(["personal:consumer:mail-list"])
    found = stack.http.query_ok(
        "personal-data:query:export-subject", {"subject": alice["id"]}, OFFICER
    )["values"]
    values = {str(item["value"]) for item in found}
    assert set(ALICE.values()) <= values
    assert not values & set(BOB.values())
    tables = {item["table"] for item in found}
    assert {
        "personal_customers",
        "personal_orders",
        "personal_mailings",
        "asanoha_events",
        "asanoha_outbox",
    } <= tables
    where = {(item["table"], item["path"]) for item in found}
    assert ("personal_orders", "address") in where
    assert ("asanoha_events", "email") in where  # the contacted event


def test_forget_subject_destroys_the_key_and_records_who_and_why(stack: Any) -> None:
    alice = customer_with_everything(stack, ALICE, "alice-order")
    bob = customer_with_everything(stack, BOB, "bob-order")
    done = stack.http.write_ok(
        "personal-data:write:forget-subject",
        {"subject": alice["id"], "reason": "erasure request #12"},
        OFFICER,
    )
    assert done["forgotten"] is True
    assert hits(stack, ALICE.values()) == []
    # Her row stays, its values read as forgotten; Bob's read.
    shown = stack.http.query_ok("personal:query:customer:detail", {"id": alice["id"]}, OFFICER)
    assert (shown["email"], shown["name"], shown["born"]) == ("[forgotten]",) * 3
    assert (
        stack.http.query_ok("personal:query:customer:detail", {"id": bob["id"]}, OFFICER)["email"]
        == BOB["email"]
    )
    exported = stack.http.query_ok(
        "personal-data:query:export-subject", {"subject": alice["id"]}, OFFICER
    )["values"]
    assert exported and {item["value"] for item in exported} == {"[forgotten]"}
    keys = stack.tables.subject_keys
    with stack.db.connect() as conn:
        row = conn.execute(keys.select().where(keys.c.subject == alice["id"])).one()
    assert (row.forgotten_by, row.forgotten_reason) == ("officer", "erasure request #12")


def test_the_handlers_are_for_system_administrators(stack: Any) -> None:
    admin = TestUsers.admin
    refused = stack.http.write_err(
        "personal-data:write:forget-subject", {"subject": "x", "reason": "r"}, admin
    )
    assert refused.http_status == 403
    assert (
        stack.http.query_err(
            "personal-data:query:export-subject", {"subject": "x"}, admin
        ).http_status
        == 403
    )
