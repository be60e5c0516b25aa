"""Bearer tokens over HTTP: missing, expired, tampered or foreign-algorithm tokens are 401."""

from __future__ import annotations

import base64
import json
import time

import jwt
import pytest

from asanoha.testing import HttpError, Stack, TestUsers
from tests.integration.http.conftest import assert_error, nothing_written

CREATE = "catalog:write:item:create"


def call_with(stack: Stack, authorization: str | None) -> HttpError:
    headers = {} if authorization is None else {"Authorization": authorization}
    with nothing_written(stack):
        response = stack.http.client.post(
            f"/api/write/{CREATE}", json={"name": "x"}, headers=headers
        )
    assert response.headers["WWW-Authenticate"] == "Bearer"
    return HttpError.from_response(response)


def claims(**overrides: object) -> dict[str, object]:
    now = int(time.time())
    return {
        "sub": "admin-a",
        "tenant": "tenant-a",
        "roles": ["Admin"],
        "exp": now + 60,
        **overrides,
    }


def test_missing_token_is_401(stack: Stack) -> None:
    error = call_with(stack, None)
    assert_error(error, 401, "unauthenticated", "token_missing")


def test_expired_token_is_401(stack: Stack) -> None:
    token = stack.http.headers_for(TestUsers.admin, ttl=-30)["Authorization"]
    error = call_with(stack, token)
    assert_error(error, 401, "unauthenticated", "token_expired")


def test_tampered_token_is_401(stack: Stack) -> None:
    token = stack.http.headers_for(TestUsers.user)["Authorization"].removeprefix("Bearer ")
    header, payload, signature = token.split(".")
    body = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    body["roles"] = ["Admin"]
    forged = base64.urlsafe_b64encode(json.dumps(body).encode()).rstrip(b"=").decode()
    error = call_with(stack, f"Bearer {header}.{forged}.{signature}")
    assert_error(error, 401, "unauthenticated", "token_invalid")


def test_token_signed_with_another_secret_is_401(stack: Stack) -> None:
    token = jwt.encode(claims(), "another-secret-of-sufficient-length!!", algorithm="HS256")
    assert_error(call_with(stack, f"Bearer {token}"), 401, "unauthenticated", "token_invalid")


@pytest.mark.filterwarnings("ignore:The HMAC key is")
@pytest.mark.parametrize("algorithm", ["HS512", "HS384"])
def test_token_with_another_hmac_algorithm_is_401(stack: Stack, algorithm: str) -> None:
    secret = stack.app.settings.jwt_secret
    token = jwt.encode(claims(), secret + "x" * 64, algorithm=algorithm)
    token_same_key = jwt.encode(claims(), secret, algorithm=algorithm)
    for candidate in (token, token_same_key):
        assert_error(
            call_with(stack, f"Bearer {candidate}"), 401, "unauthenticated", "token_invalid"
        )


def test_unsigned_none_algorithm_token_is_401(stack: Stack) -> None:
    token = jwt.encode(claims(), None, algorithm="none")
    assert_error(call_with(stack, f"Bearer {token}"), 401, "unauthenticated", "token_invalid")


@pytest.mark.parametrize(
    "authorization",
    ["Basic YWRtaW46YWRtaW4=", "Bearer", "Bearer not.a.jwt", "Bearer abc"],
)
def test_malformed_authorization_is_401(stack: Stack, authorization: str) -> None:
    assert_error(call_with(stack, authorization), 401, "unauthenticated", "token_invalid")


@pytest.mark.parametrize("missing", ["sub", "tenant", "exp"])
def test_token_without_a_required_claim_is_401(stack: Stack, missing: str) -> None:
    body = claims()
    del body[missing]
    token = jwt.encode(body, stack.app.settings.jwt_secret, algorithm="HS256")
    assert_error(call_with(stack, f"Bearer {token}"), 401, "unauthenticated", "token_invalid")


def test_token_with_malformed_roles_is_401(stack: Stack) -> None:
    token = jwt.encode(claims(roles="Admin"), stack.app.settings.jwt_secret, algorithm="HS256")
    assert_error(call_with(stack, f"Bearer {token}"), 401, "unauthenticated", "token_invalid")


def test_valid_token_names_the_caller(stack: Stack) -> None:
    me = stack.http.query_ok("catalog:query:whoami", {}, TestUsers.system_admin)
    assert me == {"id": "system-admin-a", "tenant": "tenant-a", "roles": ["Admin", "SystemAdmin"]}


def test_role_missing_from_token_is_403(stack: Stack) -> None:
    with nothing_written(stack):
        error = stack.http.write_err(CREATE, {"name": "x"}, TestUsers.user)
    assert_error(error, 403, "access_denied", "role_required")


def test_public_handler_answers_without_a_token(stack: Stack) -> None:
    data = stack.http.query_ok("catalog:query:ping", {}, TestUsers.anonymous)
    assert data == {"pong": True, "tenant": stack.app.settings.default_tenant, "anonymous": True}


def test_public_handler_still_rejects_a_bad_token(stack: Stack) -> None:
    response = stack.http.client.post(
        "/api/query/catalog:query:ping", json={}, headers={"Authorization": "Bearer abc"}
    )
    assert_error(HttpError.from_response(response), 401, "unauthenticated", "token_invalid")


def test_open_to_all_handler_rejects_anonymous_callers(stack: Stack) -> None:
    error = stack.http.query_err("catalog:query:whoami", {}, TestUsers.anonymous)
    assert_error(error, 401, "unauthenticated", "token_missing")
