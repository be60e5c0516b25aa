"""Bad requests: each answers its status and code, and writes nothing."""

from __future__ import annotations

import json

import pytest

from asanoha.testing import HttpError, Stack, TestUsers
from tests.integration.http.conftest import assert_error, nothing_written

CREATE = "catalog:write:item:create"
UPDATE = "catalog:write:item:update"


def post_raw(stack: Stack, path: str, content: bytes) -> HttpError:
    headers = {**stack.http.headers_for(TestUsers.admin), "Content-Type": "application/json"}
    response = stack.http.client.post(path, content=content, headers=headers)
    return HttpError.from_response(response)


def test_body_over_the_size_limit_is_413(stack: Stack) -> None:
    limit = stack.app.settings.max_body_bytes
    body = json.dumps({"name": "x", "notes": "a" * limit}).encode()
    with nothing_written(stack):
        error = post_raw(stack, f"/api/write/{CREATE}", body)
    assert_error(error, 413, "payload_too_large", "payload_too_large")
    assert error.details["limit"] == limit


def test_chunked_body_over_the_size_limit_is_413(stack: Stack) -> None:
    limit = stack.app.settings.max_body_bytes
    chunk = b" " * 65536

    def chunks() -> object:
        yield b'{"name": "x"'
        for _ in range(limit // len(chunk) + 2):
            yield chunk
        yield b"}"

    headers = {**stack.http.headers_for(TestUsers.admin), "Content-Type": "application/json"}
    with nothing_written(stack):
        response = stack.http.client.post(f"/api/write/{CREATE}", content=chunks(), headers=headers)
    assert "content-length" not in response.request.headers
    assert_error(HttpError.from_response(response), 413, "payload_too_large", "payload_too_large")


def test_json_nested_deeper_than_the_limit_is_400(stack: Stack) -> None:
    depth = stack.app.settings.max_json_depth + 1
    nested = "[" * depth + "]" * depth
    with nothing_written(stack):
        error = post_raw(
            stack, f"/api/write/{CREATE}", f'{{"name": "x", "attributes": {nested}}}'.encode()
        )
    assert_error(error, 400, "validation_error", "json_too_deep")


def test_very_deep_json_is_refused_before_parsing(stack: Stack) -> None:
    with nothing_written(stack):
        error = post_raw(stack, f"/api/write/{CREATE}", b"[" * 200_000)
    assert_error(error, 400, "validation_error", "json_too_deep")


def test_json_at_the_depth_limit_is_accepted(stack: Stack) -> None:
    depth = stack.app.settings.max_json_depth - 1  # the body object is one level itself
    nested: object = "leaf"
    for _ in range(depth):
        nested = [nested]
    row = stack.http.write_ok(CREATE, {"name": "deep", "attributes": nested}, TestUsers.admin)
    assert row["attributes"] == nested


def test_brackets_inside_strings_do_not_count_as_depth(stack: Stack) -> None:
    row = stack.http.write_ok(CREATE, {"name": "x", "notes": "[" * 100}, TestUsers.admin)
    assert row["notes"] == "[" * 100


def test_unknown_write_handler_is_404(stack: Stack) -> None:
    with nothing_written(stack):
        error = stack.http.write_err("catalog:write:item:explode-all", {}, TestUsers.admin)
    assert_error(error, 404, "not_found", "handler_not_found")
    assert error.details["handler"] == "catalog:write:item:explode-all"


def test_query_handler_name_on_the_write_route_is_404(stack: Stack) -> None:
    with nothing_written(stack):
        error = stack.http.write_err("catalog:query:item:list", {}, TestUsers.admin)
    assert_error(error, 404, "not_found", "handler_not_found")


def test_unknown_query_handler_is_404(stack: Stack) -> None:
    error = stack.http.query_err("catalog:query:nothing", {}, TestUsers.admin)
    assert_error(error, 404, "not_found", "handler_not_found")


def test_malformed_json_is_400(stack: Stack) -> None:
    for body in (b'{"name": ', b"{'name': 'x'}", b'{"name": NaN}', b"\xff\xfe"):
        with nothing_written(stack):
            error = post_raw(stack, f"/api/write/{CREATE}", body)
        assert_error(error, 400, "validation_error", "malformed_json")


def test_wrong_field_types_list_one_entry_per_path(stack: Stack) -> None:
    payload = {
        "name": 5,
        "quantity": "many",
        "active": "perhaps",
        "status": "archived",
        "price": "cheap",
        "launch": "yesterday-ish",
        "supplier": "not-a-uuid",
        "unknown": 1,
    }
    with nothing_written(stack):
        error = stack.http.write_err(CREATE, payload, TestUsers.admin)
    assert_error(error, 400, "validation_error", "validation_failed")
    paths = [entry["path"] for entry in error.details["fields"]]
    assert sorted(paths) == sorted(
        ["name", "quantity", "active", "status", "price", "launch", "supplier", "unknown"]
    )
    assert all({"path", "type", "message"} <= set(entry) for entry in error.details["fields"])


def test_nested_field_paths_are_dotted(stack: Stack) -> None:
    payload = {"id": "not-a-uuid", "version": 0, "changes": {"quantity": "x", "name": None}}
    with nothing_written(stack):
        error = stack.http.write_err(UPDATE, payload, TestUsers.admin)
    assert_error(error, 400, "validation_error", "validation_failed")
    paths = sorted(entry["path"] for entry in error.details["fields"])
    assert paths == ["changes.name", "changes.quantity", "id", "version"]


def test_missing_required_field_is_400(stack: Stack) -> None:
    with nothing_written(stack):
        error = stack.http.write_err(CREATE, {"quantity": 1}, TestUsers.admin)
    assert_error(error, 400, "validation_error", "validation_failed")
    assert [entry["path"] for entry in error.details["fields"]] == ["name"]


def test_body_that_is_not_an_object_is_400(stack: Stack) -> None:
    for body in ([1, 2], "text", 3):
        with nothing_written(stack):
            error = stack.http.write_err(CREATE, body, TestUsers.admin)
        assert_error(error, 400, "validation_error", "validation_failed")
        assert len(error.details["fields"]) == 1


def test_batch_with_a_malformed_item_is_400_in_the_handler_format(stack: Stack) -> None:
    with nothing_written(stack):
        response = stack.http.post("/api/batch", {"items": [{"qn": CREATE, "payload": [1]}, {}]})
    error = HttpError.from_response(response)
    assert_error(error, 400, "validation_error", "validation_failed")
    paths = sorted(entry["path"] for entry in error.details["fields"])
    assert paths == ["items.0.payload", "items.1.qn"]


@pytest.mark.parametrize(
    "field_values",
    [
        {"name": "a\x00b"},
        {"notes": "\x00"},
        {"attributes": {"key": "\x00"}},
        {"attributes": {"\x00": 1}},
        {"quantity": 2**63},
        {"quantity": -(2**63) - 1},
        {"price": "1e40"},
        {"weight": "NaN"},
        {"weight": "inf"},
    ],
    ids=repr,
)
def test_values_the_columns_cannot_store_are_400(
    stack: Stack, field_values: dict[str, object]
) -> None:
    with nothing_written(stack):
        error = stack.http.write_err(CREATE, {"name": "x", **field_values}, TestUsers.admin)
    assert_error(error, 400, "validation_error", "validation_failed")
    assert error.details["fields"][0]["path"].split(".")[0] in field_values


def test_a_number_beyond_double_range_is_malformed_json(stack: Stack) -> None:
    with nothing_written(stack):
        error = post_raw(stack, f"/api/write/{CREATE}", b'{"name": "x", "weight": 1e400}')
    assert_error(error, 400, "validation_error", "malformed_json")
