"""``ASANOHA_MAX_BATCH_ITEMS``: a batch above the limit is refused before any item runs."""

from __future__ import annotations

from asanoha.testing import Stack, TestUsers
from asanoha.testing.plugin import StackFactory
from tests.integration.http.conftest import assert_error, count_rows
from tests.integration.http.features import catalog, gate

CREATE = "catalog:write:item:create"


def creates(count: int) -> list[tuple[str, dict[str, str]]]:
    return [(CREATE, {"name": f"item {n}"}) for n in range(count)]


def test_a_batch_above_the_default_limit_is_refused_with_nothing_written(stack: Stack) -> None:
    with stack.nothing_written():
        error = stack.http.batch_err(creates(101), TestUsers.admin)
    assert_error(error, 413, "payload_too_large", "batch_too_large")
    assert error.details == {"items": 101, "limit": 100}
    assert "ASANOHA_MAX_BATCH_ITEMS" in error.message


def test_a_batch_at_the_limit_runs(stack: Stack) -> None:
    results = stack.http.batch_ok(creates(100), TestUsers.admin)
    assert len(results) == 100
    assert count_rows(stack)["catalog:item"] == 100


def test_the_limit_is_a_setting_and_in_the_openapi_document(asanoha_stack: StackFactory) -> None:
    stack = asanoha_stack(features=[gate, catalog], settings={"max_batch_items": 2})
    assert len(stack.http.batch_ok(creates(2), TestUsers.admin)) == 2
    with stack.nothing_written():
        error = stack.http.batch_err(creates(3), TestUsers.admin)
    assert_error(error, 413, "payload_too_large", "batch_too_large")
    assert error.details == {"items": 3, "limit": 2}
    document = stack.http.client.get("/openapi.json").json()
    items = document["components"]["schemas"]["BatchRequest"]["properties"]["items"]
    assert (items["minItems"], items["maxItems"]) == (1, 2)
