"""Field options that bound a value (format, min/max, min_items/max_items) and the
multi_select and timezone kinds: checked at write, stated in the OpenAPI document."""

from __future__ import annotations

from typing import Any

import pytest

from asanoha import UnprocessableError, ValidationError
from asanoha.platform.model.agent_tools import list_agent_tools
from asanoha.testing import TestUsers

ADMIN = TestUsers.admin
CREATE = "shop:write:order:create"


GOOD = {
    "quantity": 100,
    "due": "2020-01-01",
    "website": "https://example.org/shop",
    "phone": "+49 (30) 1234-5678",
    "tags": ["rush", "gift"],
    "zone": "Europe/Berlin",
}


def test_values_within_their_bounds_are_written_and_read_back(stack: Any) -> None:
    row = stack.service.dispatch_write(CREATE, GOOD, ADMIN)
    detail = stack.service.dispatch_query("shop:query:order:detail", {"id": str(row["id"])}, ADMIN)
    assert {name: detail[name] for name in GOOD} == {
        **GOOD,
        "due": __import__("datetime").date(2020, 1, 1),
    }
    listed = stack.service.dispatch_query(
        "shop:query:order:list", {"filter": {"zone": "Europe/Berlin"}}, ADMIN
    )
    assert [r["id"] for r in listed["rows"]] == [row["id"]]


OUT_OF_BOUNDS = [
    ("quantity", 0, "min", 1),
    ("quantity", 101, "max", 100),
    ("due", "2019-12-31", "min", "2020-01-01"),
    ("website", "ftp://example.org", "format", "url"),
    ("phone", "030 1234", "format", "phone"),
    ("tags", [], "min_items", 1),
    ("tags", ["rush", "gift", "fragile"], "max_items", 2),
]


def test_a_value_outside_its_bounds_is_refused_naming_the_field(stack: Any) -> None:
    for field, value, rule, limit in OUT_OF_BOUNDS:
        with stack.nothing_written(), pytest.raises(UnprocessableError) as raised:
            stack.service.dispatch_write(CREATE, {**GOOD, field: value}, ADMIN)
        assert raised.value.reason == "field_rule_failed"
        details = raised.value.details
        assert (details["entity"], details["field"], details["rule"], details["limit"]) == (
            "shop:order",
            field,
            rule,
            limit,
        )


def test_an_update_outside_the_bounds_is_refused_over_http(sqlite_stack: Any) -> None:
    stack = sqlite_stack
    row = stack.service.dispatch_write(CREATE, {}, ADMIN)
    payload = {"id": str(row["id"]), "version": 1, "changes": {"quantity": 500}}
    with stack.nothing_written():
        error = stack.http.write_err("shop:write:order:update", payload)
    assert (error.http_status, error.code, error.reason) == (
        422,
        "unprocessable",
        "field_rule_failed",
    )
    assert error.details["field"] == "quantity"


def test_a_malformed_email_of_a_personal_field_is_refused(sqlite_stack: Any) -> None:
    stack = sqlite_stack
    with stack.nothing_written(), pytest.raises(UnprocessableError) as raised:
        stack.service.dispatch_write(
            "shop:write:customer:create", {"name": "Ada", "email": "ada@"}, ADMIN
        )
    assert (raised.value.details["field"], raised.value.details["rule"]) == ("email", "format")


WRONG_SHAPE = [("tags", ["rush", "rush"]), ("tags", ["x"]), ("zone", "Mars/Olympus"), ("zone", 5)]


def test_a_value_of_the_wrong_shape_is_a_validation_error(sqlite_stack: Any) -> None:
    stack = sqlite_stack
    for field, value in WRONG_SHAPE:
        with stack.nothing_written(), pytest.raises(ValidationError) as raised:
            stack.service.dispatch_write(CREATE, {field: value}, ADMIN)
        assert raised.value.details["fields"][0]["path"].startswith(field)


def test_the_openapi_document_states_the_bounds(sqlite_stack: Any) -> None:
    stack = sqlite_stack
    document = stack.http.client.get("/openapi.json").json()
    schemas = document["components"]["schemas"]
    order = next(s for name, s in schemas.items() if name.startswith("OrderCreatePayload"))
    props = order["properties"]
    assert (props["quantity"]["minimum"], props["quantity"]["maximum"]) == (1, 100)
    assert props["due"]["x-minimum"] == "2020-01-01"
    assert props["website"]["format"] == "uri"
    assert props["phone"]["x-format"] == "phone"
    assert (props["tags"]["minItems"], props["tags"]["maxItems"]) == (1, 2)
    tags = props["tags"]["anyOf"][0]
    assert (tags["uniqueItems"], tags["items"]["enum"]) == (True, ["rush", "gift", "fragile"])
    assert props["zone"]["anyOf"][0]["x-format"] == "iana-time-zone"
    customer = next(s for name, s in schemas.items() if name.startswith("CustomerCreatePayload"))
    assert customer["properties"]["email"]["format"] == "email"


def test_the_agent_tool_schema_states_the_bounds(sqlite_stack: Any) -> None:
    tools = list_agent_tools(sqlite_stack.registry, ADMIN)
    create = next(tool for tool in tools if tool.name == CREATE)
    props = create.input_schema["properties"]
    assert (props["quantity"]["minimum"], props["tags"]["maxItems"]) == (1, 2)
