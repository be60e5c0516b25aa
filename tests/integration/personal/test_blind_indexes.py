"""Blind indexes are computed where rows are projected, from the opened values: a renamed
field filters after a rebuild, and a forgotten value matches no filter."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from asanoha import Access, Entity, Feature, SessionUser, fields
from asanoha.handlers import personal_data
from asanoha.platform.store import append_event, read_events, rebuild_projection
from asanoha.platform.store.rebuild import rebuild_guarded
from asanoha.testing import TestUsers
from tests.integration.personal.features import RECEIVED, personal
from tests.integration.personal.test_forget import ALICE, BOB, customer_with_everything

ADMIN = TestUsers.admin
OFFICER = SessionUser.of("officer", ADMIN.tenant_id, ["SystemAdmin", "Admin"])
CONTACT = "directory:contact"
MAIL = "ada@example.org"


def rename_mail(values: dict[str, Any], verb: str) -> dict[str, Any]:
    """Version 1 -> 2: the field ``mail`` became ``email``."""
    if "mail" in values:
        values["email"] = values.pop("mail")
    return values


def directory() -> Feature:
    """Contacts at version 2: their filterable personal field ``mail`` is now ``email``."""
    feature = Feature("directory")
    feature.crud(
        "contact",
        Entity(
            table="directory_contacts",
            fields={
                "email": fields.text(personal="self", filterable=True),
                "city": fields.text(personal=False, reason="fixture"),
            },
            version=2,
            upcasters={1: rename_mail},
        ),
        write=Access(roles=["Admin"]),
        read=Access(roles=["Admin"]),
    )
    return feature


@pytest.fixture(params=["postgres", "sqlite"])
def directory_stack(request: pytest.FixtureRequest, asanoha_stack: Callable[..., Any]) -> Any:
    return asanoha_stack(features=[directory()], database=request.param)


@pytest.fixture(params=["postgres", "sqlite"])
def forgetting_stack(request: pytest.FixtureRequest, asanoha_stack: Callable[..., Any]) -> Any:
    RECEIVED.clear()
    return asanoha_stack(features=[personal, personal_data.feature], database=request.param)


def store_version_1_contact(stack: Any, email: str) -> str:
    """A contact created by version 1 of the code: its value sealed under the old field
    name, and the event carrying the blind index map that code wrote."""
    row_id = str(uuid.uuid4())
    tenant = ADMIN.tenant_id
    with stack.db.begin() as conn:
        vault = stack.service.personal.vault(conn)
        sealed = vault.seal(tenant, row_id, CONTACT, "mail", email)
        append_event(
            conn,
            stack.db.backend,
            stack.tables,
            tenant_id=tenant,
            stream_id=row_id,
            stream_type=CONTACT,
            expected_version=0,
            type="directory:event:contact.created",
            payload={
                "data": {"mail": sealed, "city": "London"},
                "blind": {"mail": vault.blind(tenant, CONTACT, "mail", email)},
            },
            metadata={},
            created_by="old-code",
            schema_version=1,
        )
    return row_id


def listed(stack: Any, email: str) -> list[str]:
    rows = stack.http.query_ok("directory:query:contact:list", {"filter": {"email": email}}, ADMIN)[
        "rows"
    ]
    return [str(row["id"]) for row in rows]


def test_a_renamed_filterable_personal_field_filters_after_a_rebuild(directory_stack: Any) -> None:
    stack = directory_stack
    old = store_version_1_contact(stack, MAIL)
    new = stack.http.write_ok(
        "directory:write:contact:create", {"email": "grace@example.org", "city": "NYC"}, ADMIN
    )["id"]
    with stack.db.begin() as conn:
        rebuild_projection(conn, stack.tables, stack.registry.entity(CONTACT))
    assert listed(stack, MAIL) == [old]
    assert listed(stack, "grace@example.org") == [new]
    shown = stack.http.query_ok("directory:query:contact:detail", {"id": old}, ADMIN)
    assert (shown["email"], shown["city"]) == (MAIL, "London")
    # An update through the renamed field indexes the new value and drops the old one.
    stack.http.write_ok(
        "directory:write:contact:update",
        {"id": old, "version": 1, "changes": {"email": "ada.king@example.org"}},
        ADMIN,
    )
    with stack.db.begin() as conn:
        rebuild_projection(conn, stack.tables, stack.registry.entity(CONTACT))
    assert listed(stack, "ada.king@example.org") == [old]
    assert listed(stack, MAIL) == []


def test_new_events_carry_no_blind_index(directory_stack: Any) -> None:
    stack = directory_stack
    stack.http.write_ok("directory:write:contact:create", {"email": MAIL, "city": "x"}, ADMIN)
    events = stack.tables.events
    with stack.db.connect() as conn:
        payloads = conn.execute(events.select().with_only_columns(events.c.payload)).scalars()
        assert [sorted(payload) for payload in payloads] == [["data"]]


def customers_with_email(stack: Any, *emails: str) -> list[str]:
    rows = stack.http.query_ok(
        "personal:query:customer:list", {"filter": {"email": {"in": list(emails)}}}, ADMIN
    )["rows"]
    return [str(row["id"]) for row in rows]


def test_a_forgotten_value_matches_no_filter_also_after_a_rebuild(forgetting_stack: Any) -> None:
    stack = forgetting_stack
    alice = customer_with_everything(stack, ALICE, "alice-order")["id"]
    bob = customer_with_everything(stack, BOB, "bob-order")["id"]
    assert customers_with_email(stack, ALICE["email"]) == [alice]
    stack.http.write_ok(
        "personal-data:write:forget-subject",
        {"subject": alice, "reason": "erasure request"},
        OFFICER,
    )
    # Her row stays (its values read as forgotten), but a guess of her e-mail finds nothing.
    assert customers_with_email(stack, ALICE["email"]) == []
    assert customers_with_email(stack, ALICE["email"], BOB["email"]) == [bob]
    customers = stack.tables.entity("personal:customer")
    with stack.db.connect() as conn:
        indexes = dict(
            conn.execute(
                customers.select().with_only_columns(customers.c.id, customers.c.email__bidx)
            ).all()
        )
    assert indexes[uuid.UUID(alice)] is None and indexes[uuid.UUID(bob)] is not None
    with stack.db.begin() as conn:
        rebuild_projection(conn, stack.tables, stack.registry.entity("personal:customer"))
    assert customers_with_email(stack, ALICE["email"]) == []
    assert customers_with_email(stack, BOB["email"]) == [bob]
    rebuild_guarded(stack.db, stack.tables, stack.registry.entity("personal:customer"))
    assert customers_with_email(stack, ALICE["email"]) == []
    assert customers_with_email(stack, BOB["email"]) == [bob]
    # The forgotten e-mail no longer holds the unique index either.
    again = stack.http.write_ok(
        "personal:write:customer:create", {"email": ALICE["email"], "name": "A. L."}, ADMIN
    )
    assert customers_with_email(stack, ALICE["email"]) == [again["id"]]


def test_an_event_stored_with_a_blind_index_map_reaches_readers_without_it(
    directory_stack: Any,
) -> None:
    stack = directory_stack
    row_id = store_version_1_contact(stack, MAIL)
    with stack.db.connect() as conn:
        (event,) = read_events(conn, stack.tables, stream_id=row_id)
    assert sorted(event.payload) == ["data"]
    assert sorted(event.payload["data"]) == ["city", "email"]
