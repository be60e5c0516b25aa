"""The OpenAPI document marks the owner rule of an entity's standard handlers and the fields
only some callers may read or write."""

from __future__ import annotations

from typing import Any

from asanoha.testing.plugin import StackFactory
from tests.integration.access.features import owned


def _resolve(document: dict[str, Any], ref: str) -> dict[str, Any]:
    node: Any = document
    for part in ref.removeprefix("#/").split("/"):
        node = node[part]
    return dict(node)


def test_owner_rules_and_guarded_fields_are_marked(asanoha_stack: StackFactory) -> None:
    stack = asanoha_stack(features=[owned], database="sqlite")
    document = stack.http.client.get("/openapi.json").json()
    listing = document["paths"]["/api/query/owned:query:note:list"]["post"]
    assert listing["x-asanoha-owner"] == (
        "only rows whose created_by is the caller's user id; roles Auditor, HR reach every row"
    )
    assert listing["x-asanoha-fields"] == {
        "review": {"read": "roles HR"},
        "salary": {"read": "roles HR", "write": "roles HR"},
        "grade": {"write": "roles HR"},
    }
    memo = document["paths"]["/api/write/owned:write:memo:delete"]["post"]
    assert memo["x-asanoha-owner"] == "only rows shared_with(row, user) accepts"
    create = document["paths"]["/api/write/owned:write:note:create"]["post"]
    schema = _resolve(
        document, create["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    )
    assert schema["properties"]["salary"]["x-asanoha-read"] == "roles HR"
    assert schema["properties"]["salary"]["x-asanoha-write"] == "roles HR"
    assert "x-asanoha-read" not in schema["properties"]["title"]
    custom = document["paths"]["/api/write/owned:write:rename-note"]["post"]
    assert "x-asanoha-owner" not in custom
