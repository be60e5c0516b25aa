"""JWT issue and decode, without a server."""

from __future__ import annotations

import time

import jwt
import pytest

from asanoha.platform.errors import AuthenticationError
from asanoha.platform.http.auth import authenticate, bearer_token, decode_token, issue_token
from asanoha.platform.model import SessionUser
from asanoha.platform.settings import Settings

SETTINGS = Settings(jwt_secret="s" * 48)
ALICE = SessionUser.of("alice", "tenant-a", ["Admin", "User"])


def reason_of(call: object) -> str:
    with pytest.raises(AuthenticationError) as raised:
        call()  # type: ignore[operator]
    assert raised.value.code == "unauthenticated"
    assert raised.value.http_status == 401
    return str(raised.value.reason)


def test_issued_token_decodes_to_the_same_user() -> None:
    assert decode_token(SETTINGS, issue_token(SETTINGS, ALICE)) == ALICE


def test_token_carries_sub_tenant_roles_and_exp() -> None:
    before = int(time.time())
    claims = jwt.decode(
        issue_token(SETTINGS, ALICE, ttl=120), SETTINGS.jwt_secret, algorithms=["HS256"]
    )
    assert claims["sub"] == "alice"
    assert claims["tenant"] == "tenant-a"
    assert claims["roles"] == ["Admin", "User"]
    assert before + 120 <= claims["exp"] <= int(time.time()) + 120
    assert jwt.get_unverified_header(issue_token(SETTINGS, ALICE))["alg"] == "HS256"


def test_expired_token_is_token_expired() -> None:
    token = issue_token(SETTINGS, ALICE, ttl=-60)  # past the clock leeway
    assert reason_of(lambda: decode_token(SETTINGS, token)) == "token_expired"


def test_token_of_another_secret_is_token_invalid() -> None:
    token = issue_token(Settings(jwt_secret="t" * 48), ALICE)
    assert reason_of(lambda: decode_token(SETTINGS, token)) == "token_invalid"


@pytest.mark.filterwarnings("ignore:The HMAC key is")
def test_token_of_another_algorithm_is_token_invalid() -> None:
    claims = {"sub": "alice", "tenant": "tenant-a", "roles": [], "exp": int(time.time()) + 60}
    for algorithm, key in (("HS512", SETTINGS.jwt_secret), ("none", None)):
        token = jwt.encode(claims, key, algorithm=algorithm)
        assert reason_of(lambda token=token: decode_token(SETTINGS, token)) == "token_invalid"


def test_garbage_is_token_invalid() -> None:
    assert reason_of(lambda: decode_token(SETTINGS, "a.b.c")) == "token_invalid"


def test_bearer_header_parsing() -> None:
    assert bearer_token(None) is None
    assert bearer_token("  ") is None
    assert bearer_token("Bearer abc") == "abc"
    assert bearer_token("bearer   abc ") == "abc"
    assert reason_of(lambda: bearer_token("Basic abc")) == "token_invalid"
    assert reason_of(lambda: bearer_token("Bearer")) == "token_invalid"


def test_missing_token_is_anonymous_only_when_allowed() -> None:
    assert reason_of(lambda: authenticate(SETTINGS, None)) == "token_missing"
    anonymous = authenticate(SETTINGS, None, allow_anonymous=True)
    assert anonymous.is_anonymous
    assert anonymous.tenant_id == SETTINGS.default_tenant
