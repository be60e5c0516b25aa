"""The money, embedded, embedded_list and located_timestamp kinds: validated, stored the same
on both databases, carried by events, rebuilt exactly, sealed when personal."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from sqlalchemy import select

from asanoha import UnprocessableError, ValidationError
from asanoha.platform.personal.sentinel import FORGOTTEN
from asanoha.platform.store import rebuild_projection
from asanoha.testing import TestUsers

ADMIN = TestUsers.admin
CREATE = "shop:write:invoice:create"


def invoice(stack: Any, **changes: Any) -> dict[str, Any]:
    ada = stack.service.dispatch_write("shop:write:customer:create", {"name": "Ada"}, ADMIN)
    return {
        "customer": str(ada["id"]),
        "total": {"amount": "12.3", "currency": "EUR"},
        "ship_to": {"street": "Main St 1", "since": "2001-02-03"},
        "lines": [
            {"item": "Book", "qty": 2, "price": {"amount": "1500", "currency": "JPY"}},
            {"item": "Pen", "qty": 1, "tags": ["gift"]},
        ],
        "due": {"at": "2026-03-29T09:30:00", "tz": "Europe/Berlin"},
        **changes,
    }


def raw_rows(stack: Any) -> list[dict[str, Any]]:
    table = stack.tables.entity("shop:invoice")
    with stack.db.connect() as conn:
        return [dict(r) for r in conn.execute(select(table).order_by(table.c.id)).mappings()]


def test_each_kind_is_written_and_answered_in_its_canonical_form(stack: Any) -> None:
    row = stack.service.dispatch_write(CREATE, invoice(stack), ADMIN)
    detail = stack.http.query_ok("shop:query:invoice:detail", {"id": str(row["id"])})
    assert detail["total"] == {"amount": "12.30", "currency": "EUR"}
    assert detail["ship_to"] == {"street": "Main St 1", "city": None, "since": "2001-02-03"}
    assert detail["lines"] == [
        {"item": "Book", "qty": 2, "price": {"amount": "1500", "currency": "JPY"}, "tags": None},
        {"item": "Pen", "qty": 1, "price": None, "tags": ["gift"]},
    ]
    assert detail["due"] == {
        "at": "2026-03-29T09:30:00",
        "tz": "Europe/Berlin",
        "utc": "2026-03-29T07:30:00+00:00",
    }
    assert detail["_refs"] == {detail["customer"]: "Ada"}
    # The column holds minor units; the personal object is sealed in the row.
    with stack.db.connect() as conn:
        total, ship_to = conn.exec_driver_sql("SELECT total, ship_to FROM mf_invoices").one()
    assert (total if isinstance(total, dict) else json.loads(total)) == {
        "minor": 1230,
        "currency": "EUR",
    }
    assert "Main St" not in str(ship_to)


def test_an_update_replaces_an_embedded_object_whole(sqlite_stack: Any) -> None:
    stack = sqlite_stack
    row = stack.service.dispatch_write(CREATE, invoice(stack), ADMIN)
    changes = {"ship_to": {"street": "Side St 2"}, "total": {"amount": "7", "currency": "KWD"}}
    payload = {"id": str(row["id"]), "version": 1, "changes": changes}
    updated = stack.service.dispatch_write("shop:write:invoice:update", payload, ADMIN)
    assert updated["ship_to"] == {"street": "Side St 2", "city": None, "since": None}
    assert updated["total"] == {"amount": "7.000", "currency": "KWD"}


REFUSED_SHAPES = [
    ("total", {"amount": "1.234", "currency": "EUR"}, "at most 2 decimal places"),
    ("total", {"amount": "1", "currency": "EURO"}, "no ISO 4217 currency code"),
    ("total", {"amount": 1.5, "currency": "EUR"}, "must be decimal text"),
    ("ship_to", {"city": "Berlin"}, "Field required"),
    ("lines", [{"item": "x", "qty": 1, "extra": 1}], "Extra inputs"),
    ("due", {"at": "2026-03-29T02:30:00", "tz": "Europe/Berlin"}, "daylight-saving gap"),
    ("due", {"at": "2026-03-29T02:30:00", "tz": "Nowhere/Land"}, "no IANA time zone"),
]


def test_a_value_of_the_wrong_shape_is_refused_and_nothing_is_written(sqlite_stack: Any) -> None:
    stack = sqlite_stack
    payload = invoice(stack)
    for field, value, message in REFUSED_SHAPES:
        with stack.nothing_written(), pytest.raises(ValidationError) as raised:
            stack.service.dispatch_write(CREATE, {**payload, field: value}, ADMIN)
        (entry, *_) = raised.value.details["fields"]
        assert entry["path"].startswith(field) and message in entry["message"], entry


BROKEN_BOUNDS = [
    ("total", {"amount": "-1", "currency": "EUR"}, "total", "min"),
    ("ship_to", {"street": "x", "since": "1999-12-31"}, "ship_to.since", "min"),
    ("lines", [{"item": "a", "qty": 1}, {"item": "b", "qty": 0}], "lines.1.qty", "min"),
    ("lines", [{"item": "a", "qty": 1}] * 4, "lines", "max_items"),
    ("due", {"at": "2019-12-31T23:00:00", "tz": "UTC"}, "due", "min"),
]


def test_a_value_outside_its_bounds_is_refused_naming_its_path(stack: Any) -> None:
    payload = invoice(stack)
    for field, value, path, rule in BROKEN_BOUNDS:
        with stack.nothing_written(), pytest.raises(UnprocessableError) as raised:
            stack.service.dispatch_write(CREATE, {**payload, field: value}, ADMIN)
        details = raised.value.details
        assert (details["field"], details["rule"]) == (path, rule)


def test_the_event_carries_the_api_form_and_a_rebuild_reproduces_the_rows(stack: Any) -> None:
    for _ in range(3):
        row = stack.service.dispatch_write(CREATE, invoice(stack), ADMIN)
    payload = {"id": str(row["id"]), "version": 1, "changes": {"lines": [{"item": "Z", "qty": 9}]}}
    stack.service.dispatch_write("shop:write:invoice:update", payload, ADMIN)
    before = raw_rows(stack)
    listed = stack.service.dispatch_query("shop:query:invoice:list", {}, ADMIN)
    with stack.db.begin() as conn:
        rebuild_projection(conn, stack.tables, stack.registry.entity("shop:invoice"))
    assert raw_rows(stack) == before
    assert stack.service.dispatch_query("shop:query:invoice:list", {}, ADMIN) == listed
    events = stack.tables.events
    with stack.db.connect() as conn:
        created = conn.execute(
            select(events.c.payload).where(events.c.type == "shop:event:invoice.created")
        ).scalar()
    assert created["data"]["total"] == {"amount": "12.30", "currency": "EUR"}
    assert created["data"]["due"]["utc"] == "2026-03-29T07:30:00+00:00"


def test_the_openapi_document_describes_each_kind(sqlite_stack: Any) -> None:
    stack = sqlite_stack
    schemas = stack.http.client.get("/openapi.json").json()["components"]["schemas"]
    props = next(s for n, s in schemas.items() if n.startswith("InvoiceCreatePayload"))[
        "properties"
    ]
    money = props["total"]
    assert money["required"] == ["amount", "currency"] and money["x-minimum"] == "0"
    assert props["lines"]["anyOf"][0]["type"] == "array"
    assert props["lines"]["maxItems"] == 3
    assert set(props["due"]["anyOf"][0]["properties"]) == {"at", "tz", "utc"}
    line = next(s for n, s in schemas.items() if n.startswith("MfInvoicesLines"))
    assert line["required"] == ["item", "qty"]


def test_a_personal_embedded_object_follows_its_subjects_forget(stack: Any) -> None:
    payload = invoice(stack)
    row = stack.service.dispatch_write(CREATE, payload, ADMIN)
    stack.service.dispatch_write("shop:write:forget-customer", {"id": payload["customer"]}, ADMIN)
    detail = stack.service.dispatch_query(
        "shop:query:invoice:detail", {"id": str(row["id"])}, ADMIN
    )
    assert detail["ship_to"] == FORGOTTEN
    # The rest of the row, and what it refers to, stay as they were.
    assert detail["total"] == {"amount": "12.30", "currency": "EUR"}
    assert (detail["customer"], detail["_refs"]) == (uuid.UUID(payload["customer"]), {})
