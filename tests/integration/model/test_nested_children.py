"""``fields.has_many(child, via=..., nested=True)``: a parent's create takes its children and
creates them with it, in one transaction, each through the child's own write path; a bad
child refuses the whole create, naming its field, and nothing is written."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from asanoha import Access, Entity, Feature, fields
from asanoha.platform.errors import DefinitionError
from asanoha.platform.model import Registry
from asanoha.testing import TestUsers

ADMIN = TestUsers.admin
STAFF = Access(roles=["Admin"])

line = Entity(
    table="nested_order_lines",
    fields={
        "order": fields.reference("shop:order", required=True, on_delete="restrict"),
        "sku": fields.text(required=True, personal=False, reason="a product code"),
        "qty": fields.integer(required=True, min=1),
    },
)
order = Entity(
    table="nested_orders",
    fields={
        "customer": fields.text(required=True, personal=False, reason="a customer code"),
        "lines": fields.has_many(line, via="order", nested=True),
    },
)
shop = Feature("shop")
shop.crud("order", order, write=STAFF, read=STAFF)
shop.crud("line", line, write=STAFF, read=STAFF)


@pytest.fixture(params=["postgres", "sqlite"])
def stack(request: pytest.FixtureRequest, asanoha_stack: Any) -> Any:
    return asanoha_stack(features=[shop], database=request.param)


def _lines(stack: Any) -> list[tuple[str, str, int]]:
    table = stack.tables.entities["shop:line"]
    with stack.db.connect() as conn:
        rows = conn.execute(select(table.c.order, table.c.sku, table.c.qty)).all()
    return sorted((str(row.order), row.sku, row.qty) for row in rows)


def test_an_order_is_created_with_its_lines_in_one_write(stack: Any) -> None:
    payload = {"customer": "c-1", "lines": [{"sku": "a", "qty": 2}, {"sku": "b", "qty": 1}]}
    created = stack.http.write_ok("shop:write:order:create", payload, ADMIN)
    order_id = str(created["id"])
    assert [(row["sku"], row["qty"], str(row["order"])) for row in created["lines"]] == [
        ("a", 2, order_id),
        ("b", 1, order_id),
    ]
    assert _lines(stack) == [(order_id, "a", 2), (order_id, "b", 1)]
    # Each child has its own stream and created event, as a create of its own would.
    events = stack.tables.events
    with stack.db.connect() as conn:
        types = sorted(conn.execute(select(events.c.type)).scalars())
    assert types == ["shop:event:line.created"] * 2 + ["shop:event:order.created"]
    # The order's own row and event hold no "lines" column.
    detail = stack.http.query_ok("shop:query:order:detail", {"id": order_id}, ADMIN)
    assert "lines" not in detail


def test_a_bad_child_refuses_the_whole_create_and_nothing_is_kept(stack: Any) -> None:
    # A child the payload's schema refuses: nothing is sent to the database.
    malformed = {"customer": "c-1", "lines": [{"sku": "a", "qty": 2}, {"sku": "b"}]}
    with stack.nothing_written():
        error = stack.http.write_err("shop:write:order:create", malformed, ADMIN)
    assert (error.http_status, error.reason) == (400, "validation_failed")
    assert [item["path"] for item in error.details["fields"]] == ["lines.1.qty"]

    # A child its entity's own rules refuse: the parent written before it rolls back with
    # it, and the error names the child and its field from the parent's payload.
    before = stack.row_counts()
    payload = {"customer": "c-1", "lines": [{"sku": "a", "qty": 2}, {"sku": "b", "qty": 0}]}
    error = stack.http.write_err("shop:write:order:create", payload, ADMIN)
    assert (error.http_status, error.reason) == (422, "field_rule_failed")
    assert (error.details["entity"], error.details["field"]) == ("shop:line", "lines.1.qty")
    assert stack.row_counts() == before
    assert _lines(stack) == []


def test_has_many_declared_wrong_fails_at_definition() -> None:
    with pytest.raises(DefinitionError, match="via='sku' must name a reference field"):
        Entity(
            table="bad_orders",
            fields={"lines": fields.has_many(line, via="sku", nested=True)},
        )
    loose = Feature("loose")
    loose.crud(
        "order",
        Entity(table="loose_orders", fields={"lines": fields.has_many(line, via="order")}),
        write=STAFF,
        read=STAFF,
    )
    with pytest.raises(DefinitionError, match="is not registered by any feature"):
        Registry([loose])
    item = Entity(table="deep_items", fields={"box": fields.reference("x:box", required=True)})
    box = Entity(
        table="deep_boxes",
        fields={
            "crate": fields.reference("x:crate"),
            "items": fields.has_many(item, via="box", nested=True),
        },
    )
    with pytest.raises(DefinitionError, match="nested creates go one level deep"):
        Entity(
            table="deep_crates", fields={"boxes": fields.has_many(box, via="crate", nested=True)}
        )
