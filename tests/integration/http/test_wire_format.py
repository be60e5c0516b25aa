"""Success and error bodies, translated user messages, request ids and internal errors."""

from __future__ import annotations

import uuid

from sqlalchemy import select

from asanoha.testing import HttpError, Stack, TestUsers
from asanoha.testing.plugin import StackFactory
from tests.integration.http.conftest import assert_error, count_rows, nothing_written
from tests.integration.http.features import SUPPLIER_CREATE, catalog, gate

CREATE = "catalog:write:item:create"
MID = "instructiongate:write:create-prompt-mid"


def test_success_body_carries_the_handler_data_with_json_types(stack: Stack) -> None:
    supplier = stack.http.write_ok(SUPPLIER_CREATE, {"name": "s"}, TestUsers.admin)["id"]
    payload = {
        "name": "widget",
        "quantity": 3,
        "weight": 1.5,
        "price": "19.99",
        "active": True,
        "status": "live",
        "available_from": "2026-01-02T03:04:05+00:00",
        "launch": "2026-02-03",
        "supplier": str(supplier),
        "attributes": {"colour": ["red", "blue"]},
    }
    response = stack.http.write(CREATE, payload, TestUsers.admin)
    assert response.status_code == 200
    body = response.json()
    assert body["isSuccess"] is True
    data = body["data"]
    uuid.UUID(data["id"])
    assert data["supplier"] == supplier
    assert data["launch"] == "2026-02-03"
    assert data["available_from"].startswith("2026-01-02T03:04:05")
    assert float(data["price"]) == 19.99
    assert data["attributes"] == {"colour": ["red", "blue"]}


def test_error_body_has_every_member(stack: Stack) -> None:
    response = stack.http.write(MID, {"label": "x", "body": "y"}, TestUsers.admin)
    body = response.json()
    assert body["isSuccess"] is False
    assert set(body["error"]) == {
        "code",
        "reason",
        "message",
        "userMessage",
        "details",
        "requestId",
    }
    assert body["error"]["requestId"] == response.headers["X-Request-ID"]


def test_accept_language_de_gives_the_german_user_message(stack: Stack) -> None:
    error = stack.http.write_err(
        MID,
        {"label": "x", "body": "y"},
        TestUsers.admin,
        headers={"Accept-Language": "de-DE,de;q=0.9"},
    )
    assert error.user_message == "Diese Änderung erfordert eine höhere Vertrauensstufe."
    assert MID in error.message  # the developer message stays English


def test_unsupported_language_falls_back_to_english(stack: Stack) -> None:
    error = stack.http.write_err(
        MID, {"label": "x", "body": "y"}, TestUsers.admin, headers={"Accept-Language": "fr"}
    )
    assert error.user_message == "This change needs a higher level of trust."


def test_german_user_message_on_a_validation_error(stack: Stack) -> None:
    error = stack.http.write_err(
        CREATE, {"name": 1}, TestUsers.admin, headers={"Accept-Language": "de"}
    )
    assert error.user_message == "Einige Ihrer Angaben sind ungültig."


def test_request_ids_are_minted_and_echoed(stack: Stack) -> None:
    response = stack.http.write(CREATE, {"name": "a"}, TestUsers.admin)
    request_id = response.headers["X-Request-ID"]
    assert len(request_id) == 32
    assert response.headers["X-Correlation-ID"] == request_id


def test_request_ids_are_read_sanitised_and_stored_in_event_metadata(stack: Stack) -> None:
    headers = {"X-Request-ID": "req-1<script>", "X-Correlation-ID": "flow 42"}
    response = stack.http.write(CREATE, {"name": "a"}, TestUsers.admin, headers=headers)
    assert response.status_code == 200
    assert response.headers["X-Request-ID"] == "req-1script"
    assert response.headers["X-Correlation-ID"] == "flow42"
    with stack.db.connect() as conn:
        metadata = conn.execute(select(stack.tables.events.c.metadata)).scalar_one()
    assert metadata["request_id"] == "req-1script"
    assert metadata["correlation_id"] == "flow42"


def test_an_overlong_request_id_is_cut(stack: Stack) -> None:
    response = stack.http.write(
        CREATE, {"name": "a"}, TestUsers.admin, headers={"X-Request-ID": "a" * 500}
    )
    assert response.headers["X-Request-ID"] == "a" * 128


def test_request_ids_are_echoed_on_framework_errors(stack: Stack) -> None:
    response = stack.http.client.get("/no/such/path", headers={"X-Request-ID": "abc"})
    assert response.headers["X-Request-ID"] == "abc"
    error = HttpError.from_response(response)
    assert error.http_status == 404
    assert error.request_id == "abc"


def test_internal_error_is_500_without_a_stack_trace(stack: Stack) -> None:
    with nothing_written(stack):
        error = stack.http.write_err("catalog:write:explode", {}, TestUsers.admin)
    assert_error(error, 500, "internal_error", "internal_error")
    assert error.request_id
    assert error.request_id in error.message
    assert "secret internals" not in str(error.body)
    assert "Traceback" not in str(error.body)


def test_internal_error_after_an_insert_rolls_back(stack: Stack) -> None:
    before = count_rows(stack)
    error = stack.http.write_err("catalog:write:rename-all", {"name": "x"}, TestUsers.admin)
    assert_error(error, 500, "internal_error", "internal_error")
    assert count_rows(stack) == before


def test_development_mode_shows_the_stack_trace(asanoha_stack: StackFactory) -> None:
    stack = asanoha_stack(features=[gate, catalog], settings={"development": True})
    error = stack.http.write_err("catalog:write:explode", {}, TestUsers.admin)
    assert_error(error, 500, "internal_error", "internal_error")
    assert "secret internals" in error.details["exception"]
    assert any("Traceback" in line for line in error.details["traceback"])


def test_batch_runs_every_item_in_one_transaction(stack: Stack) -> None:
    results = stack.http.batch_ok(
        [
            (CREATE, {"name": "a"}),
            {"qn": "instructiongate:write:prompt:create", "payload": {"label": "p"}},
        ],
        TestUsers.admin,
    )
    assert [results[0]["name"], results[1]["label"]] == ["a", "p"]
    rows = count_rows(stack)
    assert rows["catalog:item"] == 1
    assert rows["instructiongate:prompt"] == 1


def test_batch_failure_rolls_back_every_item_and_names_its_index(stack: Stack) -> None:
    before = count_rows(stack)
    error = stack.http.batch_err(
        [(CREATE, {"name": "a"}), (CREATE, {"name": "b"}), (MID, {"label": "x", "body": "y"})],
        TestUsers.admin,
    )
    assert_error(error, 403, "access_denied", "instruction_field_write_requires_high_risk")
    assert error.details["index"] == 2
    assert count_rows(stack) == before


def test_batch_with_an_unknown_handler_names_its_index(stack: Stack) -> None:
    with nothing_written(stack):
        error = stack.http.batch_err([("catalog:write:nothing", {})], TestUsers.admin)
    assert_error(error, 404, "not_found", "handler_not_found")
    assert error.details["index"] == 0
