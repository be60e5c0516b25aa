"""Tokens of an identity provider through the HTTP app: the matrix over RS256, RS384, RS512,
PS256, ES256, ES384, EdDSA and own HS256 answers 200 or 401 with its reason, never 5xx; a
key-set server that goes down or answers garbage keeps good tokens working; forged kids fetch
the key set at most once per 30 seconds."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator

import pytest

from asanoha.testing import HttpError, Stack, TestUsers
from asanoha.testing.plugin import StackFactory
from tests.integration.http.features import catalog, gate
from tests.unit.identity.provider import (
    AUDIENCE,
    ISSUER,
    PROVIDER_ALGORITHMS,
    Case,
    JwksServer,
    jwks_server,
    key_pair,
    own_matrix,
    provider_claims,
    provider_matrix,
)

LIST = "/api/query/catalog:query:item:list"
CREATE = "/api/write/catalog:write:item:create"


@pytest.fixture
def server() -> Iterator[JwksServer]:
    with jwks_server([key_pair(algorithm) for algorithm in PROVIDER_ALGORITHMS]) as running:
        yield running


@pytest.fixture
def stack(asanoha_stack: StackFactory, server: JwksServer) -> Stack:
    return asanoha_stack(
        features=[gate, catalog],
        settings={"jwt_jwks_url": server.url, "jwt_issuer": ISSUER, "jwt_audience": AUDIENCE},
    )


def status_of(stack: Stack, token: str, path: str = LIST) -> tuple[int, str | None, str | None]:
    response = stack.http.client.post(path, json={}, headers={"Authorization": f"Bearer {token}"})
    if response.status_code == 200:
        return 200, None, None
    error = HttpError.from_response(response)
    return error.http_status, error.reason, error.details.get("cause")


def test_the_token_matrix_answers_200_or_401_with_its_reason(stack: Stack) -> None:
    cases: list[Case] = [
        *(case for algorithm in PROVIDER_ALGORITHMS for case in provider_matrix(algorithm)),
        *own_matrix(stack.app.settings.jwt_secret),
    ]
    wrong = []
    for case in cases:
        status, reason, cause = status_of(stack, case.token)
        expected = 200 if case.reason is None else 401
        if (status, reason) != (expected, case.reason) or (
            case.cause is not None and cause != case.cause
        ):
            wrong.append(f"{case.name}: {status} {reason}/{cause}")
    assert wrong == []


def test_a_refused_provider_token_writes_nothing(stack: Stack) -> None:
    forged = key_pair("RS256", 1, kid="rs256-0").sign(provider_claims())
    with stack.nothing_written():
        response = stack.http.client.post(
            CREATE, json={"name": "x"}, headers={"Authorization": f"Bearer {forged}"}
        )
    error = HttpError.from_response(response)
    assert (error.http_status, error.code, error.reason) == (
        401,
        "unauthenticated",
        "token_invalid",
    )
    assert error.details["cause"] == "signature"


def test_a_good_provider_token_writes_as_its_user(stack: Stack) -> None:
    token = key_pair("ES256").sign(provider_claims(sub="u-7"))
    response = stack.http.client.post(
        CREATE, json={"name": "x"}, headers={"Authorization": f"Bearer {token}"}
    )
    assert response.status_code == 200, response.text
    assert response.json()["data"]["created_by"] == "u-7"


def test_a_key_set_server_that_goes_down_keeps_good_tokens_working(
    stack: Stack, server: JwksServer
) -> None:
    good = key_pair("RS256").sign(provider_claims())
    assert status_of(stack, good)[0] == 200
    server.stop()
    # Within 30 s of the first fetch an unknown kid does not reach the dead server; a failed
    # refetch keeping the cached keys is in test_provider_keys.py.
    unknown = key_pair("RS256").sign(provider_claims(), kid="new-kid")
    assert status_of(stack, unknown)[:2] == (401, "token_invalid")
    assert status_of(stack, good)[0] == 200


def test_a_key_set_server_that_answers_garbage_keeps_good_tokens_working(
    stack: Stack, server: JwksServer
) -> None:
    good = key_pair("EdDSA").sign(provider_claims())
    assert status_of(stack, good)[0] == 200
    server.mode = "garbage"
    unknown = key_pair("EdDSA").sign(provider_claims(), kid="new-kid")
    assert status_of(stack, unknown)[:2] == (401, "token_invalid")
    assert status_of(stack, good)[0] == 200


def test_random_kids_fetch_the_key_set_at_most_once_per_30_seconds(
    stack: Stack, server: JwksServer
) -> None:
    signer = key_pair("ES256")
    started = time.monotonic()
    statuses = {
        status_of(stack, signer.sign(provider_claims(), kid=secrets.token_hex(8)))[:2]
        for _ in range(200)
    }
    windows = 1 + int((time.monotonic() - started) // 30)
    assert statuses == {(401, "token_invalid")}
    # The first fetch, then at most one per 30-second window.
    assert server.fetches <= 1 + windows


def test_with_an_oidc_issuer_keys_are_discovered_and_openapi_declares_it(
    asanoha_stack: StackFactory, server: JwksServer
) -> None:
    stack = asanoha_stack(
        features=[gate, catalog],
        settings={"oidc_issuer": server.issuer, "oidc_client_id": "console"},
    )
    schemes = stack.http.client.get("/openapi.json").json()["components"]["securitySchemes"]
    assert schemes["openIdConnect"] == {
        "type": "openIdConnect",
        "openIdConnectUrl": f"{server.issuer}/.well-known/openid-configuration",
    }
    assert schemes["bearerAuth"] == {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}
    # /docs sends a token only for the schemes an operation names: each takes either.
    document = stack.http.client.get("/openapi.json").json()
    for path in (LIST, "/api/batch", "/api/auth/revoke"):
        assert document["paths"][path]["post"]["security"] == [
            {"bearerAuth": []},
            {"openIdConnect": []},
        ]
    token = key_pair("RS256").sign(provider_claims(iss=server.issuer, aud=None))
    assert status_of(stack, token)[0] == 200
    # The issuer is the expected iss: another one is refused.
    other = key_pair("RS256").sign(provider_claims(aud=None))
    assert status_of(stack, other)[:3] == (401, "token_invalid", "issuer")


def test_docs_authorize_signs_in_through_the_provider_with_pkce(
    asanoha_stack: StackFactory, server: JwksServer
) -> None:
    bare = asanoha_stack(features=[gate, catalog], settings={"oidc_issuer": server.issuer})
    assert "initOAuth" not in bare.http.client.get("/docs").text
    assert bare.http.client.get("/docs/oauth2-redirect").status_code == 404
    stack = asanoha_stack(
        features=[gate, catalog],
        settings={"oidc_issuer": server.issuer, "oidc_client_id": "console"},
    )
    page = stack.http.client.get("/docs").text
    assert "oauth2RedirectUrl: window.location.origin + '/docs/oauth2-redirect'" in page
    assert '"clientId":"console"' in page.replace(" ", "")
    assert '"usePkceWithAuthorizationCodeGrant":true' in page.replace(" ", "")
    redirect = stack.http.client.get("/docs/oauth2-redirect")
    assert redirect.status_code == 200 and "oauth2" in redirect.text


@pytest.mark.parametrize("mode", ["garbage", "error", "down"])
def test_a_key_set_server_that_fails_the_first_fetch_answers_401_not_5xx(
    asanoha_stack: StackFactory, server: JwksServer, mode: str
) -> None:
    # Within 30 s of the first fetch the key set is not fetched again, so the failing fetch
    # is the first one here (the cached keys kept by a later one: test_provider_keys.py).
    if mode == "down":
        server.stop()
    else:
        server.mode = mode
    stack = asanoha_stack(
        features=[gate, catalog],
        settings={"jwt_jwks_url": server.url, "jwt_issuer": ISSUER, "jwt_audience": AUDIENCE},
    )
    good = key_pair("RS256").sign(provider_claims())
    assert status_of(stack, good) == (401, "token_invalid", "unknown_kid")
    assert server.fetches == (0 if mode == "down" else 1)
    # Own tokens still work beside the failing provider.
    own = stack.http.headers_for(TestUsers.admin)["Authorization"].removeprefix("Bearer ")
    assert status_of(stack, own) == (200, None, None)
