"""Input that used to answer 500 answers 4xx with its code, reason and offending field, and
writes nothing; a database that cannot serve answers 503, a lost transaction 409."""

from __future__ import annotations

import base64
import json
import secrets
import threading
import time
from typing import Any

import jwt
import pytest

from asanoha import App
from asanoha.platform.settings import Settings
from asanoha.testing import HttpError, Stack, TestUsers
from asanoha.testing.http_client import TestClient
from asanoha.testing.plugin import StackFactory
from tests.integration.http.conftest import assert_error, nothing_written
from tests.integration.http.features import catalog
from tests.integration.http.input_features import intake

CREATE = "catalog:write:item:create"
LIST = "catalog:query:item:list"
SUBMIT = "intake:write:submit"


@pytest.fixture
def intake_stack(asanoha_stack: StackFactory) -> Stack:
    return asanoha_stack(features=[intake])


def post_text(stack: Stack, path: str, text: str) -> HttpError:
    """POST ``text`` as the body: JSON escapes such as \\ud800 reach the server unchanged."""
    headers = {**stack.http.headers_for(TestUsers.admin), "Content-Type": "application/json"}
    response = stack.http.client.post(path, content=text.encode(), headers=headers)
    response.content.decode("utf-8")  # the answer is valid UTF-8, echoed values included
    return HttpError.from_response(response)


def offending_paths(error: HttpError) -> list[str]:
    return [entry["path"] for entry in error.details["fields"]]


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ('{"text": "a\\u0000b"}', "text"),
        ('{"text": "\\ud800"}', "text"),
        ('{"text": "ok", "tags": {"k": ["x", "\\udfff"]}}', "tags.k.1"),
        ('{"text": "ok", "tags": {"\\u0000": 1}}', "tags.\\u0000"),
    ],
)
def test_text_no_outbox_row_can_hold_is_refused_at_admission(
    intake_stack: Stack, body: str, path: str
) -> None:
    with nothing_written(intake_stack):
        error = post_text(intake_stack, f"/api/write/{SUBMIT}", body)
    assert_error(error, 400, "validation_error", "validation_failed")
    assert offending_paths(error) == [path]
    assert error.details["fields"][0]["type"] == "unstorable_text"


def test_a_clean_payload_still_reaches_the_outbox(intake_stack: Stack) -> None:
    intake_stack.http.write_ok(SUBMIT, {"text": "fine \U0001f600"}, TestUsers.admin)
    assert intake_stack.row_counts()["outbox"] == 1


@pytest.mark.parametrize(
    "value",
    ["0001-01-01T00:00:00+01:00", "9999-12-31T23:30:00-01:00"],
)
def test_a_timestamp_outside_years_1_to_9999_in_utc_is_refused(stack: Stack, value: str) -> None:
    with nothing_written(stack):
        error = stack.http.write_err(
            CREATE, {"name": "x", "available_from": value}, TestUsers.admin
        )
    assert_error(error, 400, "validation_error", "validation_failed")
    assert offending_paths(error) == ["available_from"]
    # The tenant's list still reads.
    assert stack.http.query_ok(LIST, {}, TestUsers.admin)["rows"] == []


def test_the_edges_of_the_timestamp_range_are_stored_and_read(stack: Stack) -> None:
    for value in ("0001-01-01T00:00:00+00:00", "9999-12-31T23:59:59+00:00"):
        stack.http.write_ok(CREATE, {"name": value, "available_from": value}, TestUsers.admin)
    assert len(stack.http.query_ok(LIST, {}, TestUsers.admin)["rows"]) == 2


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ('{"filter": {"status": "\\ud800"}}', "filter.status"),
        ('{"filter": {"status": {"in": ["live", "\\ud800"]}}}', "filter.status.in.1"),
        ('{"filter": {"\\ud800": 1}}', "filter.\\ud800"),
        ('{"sort": ["\\ud800"]}', "sort.0"),
        ('{"sort": ["-\\udc00name"]}', "sort.0"),
    ],
)
def test_a_lone_surrogate_in_a_list_query_is_400(stack: Stack, body: str, path: str) -> None:
    error = post_text(stack, f"/api/query/{LIST}", body)
    assert_error(error, 400, "validation_error", "validation_failed")
    assert offending_paths(error) == [path]


def test_an_unknown_filter_key_is_echoed_in_a_valid_answer(stack: Stack) -> None:
    error = post_text(stack, f"/api/query/{LIST}", '{"filter": {"n\\u00e4me": 1}}')
    assert_error(error, 400, "validation_error", "validation_failed")
    assert offending_paths(error) == ["filter.näme"]


def test_an_offset_beyond_the_bound_is_400(stack: Stack) -> None:
    for offset in (2**63, 2**63 - 1, 2**31):
        error = stack.http.query_err(LIST, {"offset": offset}, TestUsers.admin)
        assert_error(error, 400, "validation_error", "validation_failed")
        assert offending_paths(error) == ["offset"]


def test_a_cursor_beyond_the_bound_is_400(stack: Stack) -> None:
    for offset in (2**63, 2**31):
        cursor = base64.urlsafe_b64encode(json.dumps({"o": offset}).encode()).decode()
        error = stack.http.query_err(LIST, {"cursor": cursor}, TestUsers.admin)
        assert_error(error, 400, "validation_error", "validation_failed")
        assert offending_paths(error) == ["cursor"]


def test_a_cursor_that_is_not_text_of_a_cursor_is_400(stack: Stack) -> None:
    error = post_text(stack, f"/api/query/{LIST}", '{"cursor": "\\u00ff\\u00fe"}')
    assert_error(error, 400, "validation_error", "validation_failed")
    assert offending_paths(error) == ["cursor"]


def signed(stack: Stack, **claims: Any) -> str:
    body = {
        "sub": "admin-a",
        "tenant": "tenant-a",
        "roles": ["Admin"],
        "exp": int(time.time()) + 60,
    }
    token = jwt.encode({**body, **claims}, stack.app.settings.jwt_secret, algorithm="HS256")
    return f"Bearer {token}"


@pytest.mark.parametrize(
    "claims",
    [
        {"sub": "u" * 65},
        {"tenant": "t" * 65},
        {"tenant": 7},
        {"sub": ["admin-a"]},
        {"sub": {"id": 1}},
        {"tenant": "tenant\x00a"},
        {"sub": "\ud800"},
        {"roles": ["Admin", 3]},
        {"roles": ["r" * 65]},
    ],
    ids=repr,
)
def test_odd_identity_claims_are_refused_at_authentication(
    stack: Stack, claims: dict[str, Any]
) -> None:
    headers = {"Authorization": signed(stack, **claims)}
    with nothing_written(stack):
        response = stack.http.client.post(
            f"/api/write/{CREATE}", json={"name": "x"}, headers=headers
        )
    assert_error(HttpError.from_response(response), 401, "unauthenticated", "token_invalid")


def test_ids_of_64_characters_work(stack: Stack) -> None:
    headers = {"Authorization": signed(stack, sub="u" * 64, tenant="t" * 64)}
    response = stack.http.client.post(f"/api/write/{CREATE}", json={"name": "x"}, headers=headers)
    assert response.status_code == 200, response.text


def test_an_unreachable_database_is_503_service_unavailable() -> None:
    settings = Settings(
        # Port 1 on the loopback refuses connections at once.
        database_url="postgresql+psycopg://postgres@127.0.0.1:1/none",
        jwt_secret=secrets.token_urlsafe(32),
    )
    app = App([catalog], settings)
    try:
        client = TestClient(app.http)
        from asanoha.platform.http import issue_token

        token = issue_token(settings, TestUsers.admin)
        for path, body in ((f"/api/write/{CREATE}", {"name": "x"}), (f"/api/query/{LIST}", {})):
            response = client.post(path, json=body, headers={"Authorization": f"Bearer {token}"})
            error = HttpError.from_response(response)
            assert_error(error, 503, "unavailable", "service_unavailable")
            assert error.details["retryable"] is True
            assert response.headers["Retry-After"] == "1"
            assert "127.0.0.1" not in response.text  # no connection details leak
    finally:
        app.close()


def test_a_deadlock_is_409_transaction_conflict_and_the_other_writer_wins(
    intake_stack: Stack,
) -> None:
    note = "intake:write:prompt-note:create"
    first = intake_stack.http.write_ok(note, {"label": "a"}, TestUsers.admin)["id"]
    second = intake_stack.http.write_ok(note, {"label": "b"}, TestUsers.admin)["id"]
    headers = intake_stack.http.headers_for(TestUsers.admin)
    answers: list[Any] = []

    def call(pair: dict[str, str]) -> None:
        # The stack's client serves calls from several threads at once.
        client = intake_stack.http.client
        answers.append(client.post("/api/write/intake:write:bump-pair", json=pair, headers=headers))

    callers = [
        threading.Thread(target=call, args=({"first": first, "second": second},)),
        threading.Thread(target=call, args=({"first": second, "second": first},)),
    ]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join()
    statuses = sorted(response.status_code for response in answers)
    assert statuses == [200, 409], [response.text for response in answers]
    lost = HttpError.from_response(next(r for r in answers if r.status_code == 409))
    assert_error(lost, 409, "conflict", "transaction_conflict")
    assert lost.details == {"sqlstate": "40P01", "retryable": True}


def test_ctx_entity_finds_a_crud_entity_by_its_registered_name(intake_stack: Stack) -> None:
    intake_stack.http.write_ok("intake:write:prompt-note:create", {"label": "a"}, TestUsers.admin)
    counts = intake_stack.http.query_ok("intake:query:count-notes", {}, TestUsers.admin)
    assert counts == {name: 1 for name in counts} and len(counts) == 4
