"""Personal values are sealed before they are stored; forget destroys the subject's key and
never changes a stored event."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from sqlalchemy import Text, cast, exc, select, text, update

from asanoha.platform.personal import FORGOTTEN
from asanoha.testing import TestUsers
from tests.integration.personal.features import RECEIVED
from tests.integration.personal.scan import hits

ADMIN = TestUsers.admin
CUSTOMER = "personal:write:customer"
ALICE = {
    "email": "alice.liddell@example.org",
    "name": "Alice Liddell",
    "born": "1852-05-04",
    "address": "12 Wonderland Lane",
    "contact": "alice.contact@example.org",
}
BOB = {
    "email": "bob.dylan@example.org",
    "name": "Robert Zimmerman",
    "born": "1941-05-24",
    "address": "7 Duluth Street",
    "contact": "bob.contact@example.org",
}


def customer_with_everything(stack: Any, person: dict[str, str], key: str) -> dict[str, Any]:
    """A customer, an order about them (created with an idempotency key), a domain event
    with their e-mail and the job their create triggered."""
    row: dict[str, Any] = stack.http.write_ok(
        f"{CUSTOMER}:create",
        {"email": person["email"], "name": person["name"], "born": person["born"], "plan": "p"},
        ADMIN,
    )
    stack.http.write_ok(
        "personal:write:order:create",
        {"customer": row["id"], "address": person["address"], "item": "tea"},
        ADMIN,
        headers={"Idempotency-Key": key},
    )
    stack.http.write_ok(
        "personal:write:contact", {"id": row["id"], "email": person["contact"]}, ADMIN
    )
    return row


def event_bytes(stack: Any) -> list[tuple[int, str]]:
    events = stack.tables.events
    with stack.db.connect() as conn:
        query = select(events.c.id, cast(events.c.payload, Text)).order_by(events.c.id)
        return [(int(i), str(p)) for i, p in conn.execute(query).all()]


def test_no_personal_value_is_stored_in_plain_text(stack: Any) -> None:
    customer_with_everything(stack, ALICE, "alice-order")
    stack.consumers.run_once()
    assert hits(stack, ALICE.values()) == []


def test_forget_leaves_only_ciphertext_and_never_changes_an_event(stack: Any) -> None:
    alice = customer_with_everything(stack, ALICE, "alice-order")
    bob = customer_with_everything(stack, BOB, "bob-order")
    stack.consumers.run_once(["personal:consumer:mail-list"])
    before = event_bytes(stack)

    forgotten = stack.http.write_ok("personal:write:forget-customer", {"id": alice["id"]}, ADMIN)
    assert forgotten["forgotten"] is True

    assert hits(stack, ALICE.values()) == []
    after = event_bytes(stack)
    # One event appended (forgotten); every stored event's bytes as they were.
    assert after[: len(before)] == before
    assert len(after) == len(before) + 1
    # Bob's values all still read.
    shown = stack.http.query_ok("personal:query:customer:detail", {"id": bob["id"]}, ADMIN)
    assert (shown["email"], shown["name"], shown["born"]) == (
        BOB["email"],
        BOB["name"],
        BOB["born"],
    )
    orders = stack.http.query_ok("personal:query:order:list", {}, ADMIN)["rows"]
    addresses = {str(o["customer"]): o["address"] for o in orders}
    assert addresses == {bob["id"]: BOB["address"], alice["id"]: "[forgotten]"}
    mailings = stack.http.query_ok("personal:query:mailing:list", {}, ADMIN)["rows"]
    emails = {str(m["customer"]): m["email"] for m in mailings}
    assert emails == {bob["id"]: BOB["email"], alice["id"]: "[forgotten]"}
    # A consumer reading the stream now gets the sentinel for Alice, the value for Bob.
    stack.consumers.run_once(["personal:consumer:contact-log"])
    received = dict(RECEIVED)
    assert received[bob["id"]] == BOB["contact"]
    assert received[alice["id"]] is FORGOTTEN
    # Her key row is a tombstone: who, when, why.
    keys = stack.tables.subject_keys
    with stack.db.connect() as conn:
        tombstone = conn.execute(select(keys).where(keys.c.subject == alice["id"])).one()
    assert tombstone.wrapped_key is None
    assert tombstone.forgotten_by == ADMIN.id
    assert alice["id"] in tombstone.forgotten_reason


def test_a_stored_event_payload_cannot_be_updated(stack: Any) -> None:
    customer_with_everything(stack, ALICE, "alice-order")
    events = stack.tables.events
    before = event_bytes(stack)
    with pytest.raises(exc.DatabaseError, match="append-only"), stack.db.begin() as conn:
        conn.execute(update(events).values(payload={"data": {}}))
    assert event_bytes(stack) == before
    # Other columns of an event may change (none does today); the payload may not.
    with stack.db.begin() as conn:
        conn.execute(update(events).values(created_by=events.c.created_by))


def test_equality_filters_and_unique_indexes_use_the_blind_index(stack: Any) -> None:
    alice = customer_with_everything(stack, ALICE, "alice-order")
    customer_with_everything(stack, BOB, "bob-order")
    found = stack.http.query_ok(
        "personal:query:customer:list", {"filter": {"email": ALICE["email"]}}, ADMIN
    )["rows"]
    assert [row["id"] for row in found] == [alice["id"]]
    either = stack.http.query_ok(
        "personal:query:customer:list",
        {"filter": {"email": {"in": [ALICE["email"], "nobody@example.org"]}}},
        ADMIN,
    )["rows"]
    assert [row["id"] for row in either] == [alice["id"]]
    others = stack.http.query_ok(
        "personal:query:customer:list", {"filter": {"email": {"ne": ALICE["email"]}}}, ADMIN
    )["rows"]
    assert [row["email"] for row in others] == [BOB["email"]]
    error = stack.http.query_err(
        "personal:query:customer:list", {"filter": {"email": {"gt": "a"}}}, ADMIN
    )
    assert error.http_status == 400
    taken = stack.http.write_err(
        f"{CUSTOMER}:create", {"email": ALICE["email"], "name": "another"}, ADMIN
    )
    assert (taken.http_status, taken.reason) == (409, "unique_violation")
    # An update onto a taken e-mail too; the row's own e-mail is free to keep.
    bob_id = others[0]["id"]
    onto = stack.http.write_err(
        f"{CUSTOMER}:update",
        {"id": bob_id, "version": 2, "changes": {"email": ALICE["email"]}},
        ADMIN,
    )
    assert (onto.http_status, onto.reason) == (409, "unique_violation")


def test_a_value_about_another_row_is_sealed_for_that_row(stack: Any) -> None:
    alice = customer_with_everything(stack, ALICE, "alice-order")
    orders = stack.tables.entity("personal:order")
    with stack.db.connect() as conn:
        sealed = conn.execute(select(orders.c.address)).scalar_one()
        opened = stack.service.personal.vault(conn)
        assert opened.reveal(sealed) == ALICE["address"]
        header = sealed.split(".")[1]
    # The subject in its header is the customer the order refers to.
    import base64
    import json

    parts = json.loads(base64.urlsafe_b64decode(header + "=" * (-len(header) % 4)))
    assert parts == [ADMIN.tenant_id, alice["id"], "personal:order", "address"]


def test_a_date_reads_back_as_a_date(stack: Any) -> None:
    alice = customer_with_everything(stack, ALICE, "alice-order")
    row = stack.service.dispatch_query("personal:query:customer:detail", {"id": alice["id"]}, ADMIN)
    assert row["born"] == dt.date(1852, 5, 4)
    assert text  # imported for raw statements in other tests


def test_an_idempotent_replay_answers_the_values_opened(stack: Any) -> None:
    alice = customer_with_everything(stack, ALICE, "alice-order")
    order = {"customer": alice["id"], "address": ALICE["address"], "item": "tea"}
    headers = {"Idempotency-Key": "alice-order"}
    replayed = stack.http.write_ok("personal:write:order:create", order, ADMIN, headers=headers)
    assert replayed["address"] == ALICE["address"]
    stack.http.write_ok("personal:write:forget-customer", {"id": alice["id"]}, ADMIN)
    after = stack.http.write_ok("personal:write:order:create", order, ADMIN, headers=headers)
    assert after["address"] == "[forgotten]"
