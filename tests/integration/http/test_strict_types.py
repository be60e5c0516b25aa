"""Payloads of the standard handlers take the JSON types their OpenAPI document states: no
text or boolean for a number, no number for a boolean or a timestamp; values JSON carries as
text (timestamps, dates, UUIDs, decimals) are read from their text."""

from __future__ import annotations

import pytest

from asanoha.testing import Stack, TestUsers
from tests.integration.http.conftest import assert_error
from tests.integration.http.features import SUPPLIER_CREATE

CREATE = "catalog:write:item:create"
LIST = "catalog:query:item:list"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("quantity", "1"),
        ("quantity", False),
        ("quantity", 1.5),
        ("weight", True),
        ("active", 0),
        ("active", "true"),
        ("available_from", 0),
        ("launch", 20240101),
    ],
)
def test_a_value_of_another_json_type_is_refused(stack: Stack, field: str, value: object) -> None:
    with stack.nothing_written():
        error = stack.http.write_err(CREATE, {"name": "a", field: value}, TestUsers.admin)
    assert_error(error, 400, "validation_error", "validation_failed")
    assert [found["path"] for found in error.details["fields"]] == [field]


def test_values_json_carries_as_text_are_read_from_it(stack: Stack) -> None:
    row = stack.http.write_ok(
        CREATE,
        {
            "name": "a",
            "quantity": 3.0,  # a JSON number without a fraction is an integer
            "weight": 2,
            "price": "12.50",
            "active": True,
            "available_from": "2026-01-02T03:04:05Z",
            "launch": "2026-01-02",
            "supplier": stack.http.write_ok(SUPPLIER_CREATE, {"name": "s"}, TestUsers.admin)["id"],
        },
        TestUsers.admin,
    )
    assert (row["quantity"], row["price"], row["launch"]) == (3, "12.50", "2026-01-02")


def test_list_paging_takes_integers_and_booleans_only(stack: Stack) -> None:
    for payload in ({"limit": "5"}, {"offset": False}, {"include_deleted": 0}):
        error = stack.http.query_err(LIST, payload, TestUsers.admin)
        assert_error(error, 400, "validation_error", "validation_failed")
    assert stack.http.query_ok(LIST, {"limit": 5.0}, TestUsers.admin) is not None


def test_an_empty_body_is_the_empty_payload_where_the_document_makes_it_optional(
    stack: Stack,
) -> None:
    document = stack.http.client.get("/openapi.json").json()
    headers = stack.http.headers_for(TestUsers.admin)
    for path, required in ((f"/api/query/{LIST}", False), (f"/api/write/{CREATE}", True)):
        assert document["paths"][path]["post"]["requestBody"]["required"] is required
        response = stack.http.client.post(path, headers=headers)
        assert response.status_code == (400 if required else 200), response.text
