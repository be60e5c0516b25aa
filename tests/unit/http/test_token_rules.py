"""What a bearer token may claim: never the system role, a bounded lifetime, no future ``iat``."""

from __future__ import annotations

import time
from typing import Any

import jwt
import pytest

from asanoha.platform.errors import AuthenticationError
from asanoha.platform.http.auth import (
    CLOCK_LEEWAY_SECONDS,
    TokenRefusedError,
    decode_token,
    issue_token,
)
from asanoha.platform.model import SessionUser
from asanoha.platform.settings import Settings, signing_problems

SETTINGS = Settings(jwt_secret="s" * 48)
DAY = 86400


def signed(**claims: Any) -> str:
    body = {"sub": "alice", "tenant": "tenant-a", "roles": ["Admin"], **claims}
    return jwt.encode(body, SETTINGS.jwt_secret, algorithm="HS256")


def refusal(token: str, settings: Settings = SETTINGS) -> str:
    """The ``error`` detail of the 401 ``token_invalid`` that ``token`` gets."""
    with pytest.raises(AuthenticationError) as raised:
        decode_token(settings, token)
    assert (raised.value.http_status, raised.value.reason) == (401, "token_invalid")
    return str(raised.value.details["error"])


def test_a_token_with_the_system_role_is_refused_saying_why() -> None:
    now = int(time.time())
    error = refusal(signed(roles=["Admin", "system"], iat=now, exp=now + 60))
    assert "'system'" in error
    assert "jobs and consumers" in error


def test_the_platform_issues_no_token_with_the_system_role() -> None:
    with pytest.raises(TokenRefusedError, match="'system'"):
        issue_token(SETTINGS, SessionUser.system("tenant-a"))


def test_a_token_that_never_expires_is_refused() -> None:
    now = int(time.time())
    for claims in ({"exp": 10**20}, {"iat": now, "exp": 10**20}, {"exp": 1e20}):
        error = refusal(signed(**claims))
        assert "ASANOHA_JWT_MAX_TTL_SECONDS" in error
        assert "86400" in error


def test_a_token_may_live_exactly_the_longest_lifetime() -> None:
    now = int(time.time())
    assert decode_token(SETTINGS, signed(iat=now, exp=now + DAY)).id == "alice"
    assert "'exp' minus 'iat'" in refusal(signed(iat=now, exp=now + DAY + 1))
    # Without iat the lifetime counts from now, with the clock leeway.
    assert decode_token(SETTINGS, signed(exp=now + DAY)).id == "alice"
    assert "'exp' minus now" in refusal(signed(exp=now + DAY + 2 * CLOCK_LEEWAY_SECONDS))


def test_the_longest_lifetime_is_a_setting() -> None:
    hour = Settings(jwt_secret="s" * 48, jwt_max_ttl_seconds=3600)
    now = int(time.time())
    assert decode_token(hour, signed(iat=now, exp=now + 3600)).id == "alice"
    assert "3600 seconds" in refusal(signed(iat=now, exp=now + 3601), hour)


def test_the_platform_issues_no_token_longer_than_the_longest_lifetime() -> None:
    user = SessionUser.of("alice", "tenant-a", ["Admin"])
    assert decode_token(SETTINGS, issue_token(SETTINGS, user, ttl=DAY)) == user
    with pytest.raises(TokenRefusedError, match="ASANOHA_JWT_MAX_TTL_SECONDS"):
        issue_token(SETTINGS, user, ttl=DAY + 1)


def test_a_token_issued_in_the_future_is_refused_beyond_the_leeway() -> None:
    now = int(time.time())
    later = now + CLOCK_LEEWAY_SECONDS + 60
    assert "in the future" in refusal(signed(iat=later, exp=later + 60))
    # A clock a few seconds ahead is not a forgery.
    soon = now + 5
    assert decode_token(SETTINGS, signed(iat=soon, exp=soon + 60)).id == "alice"


def test_an_expired_token_is_refused_after_the_leeway() -> None:
    now = int(time.time())
    assert decode_token(SETTINGS, signed(iat=now - 120, exp=now - 5)).id == "alice"
    with pytest.raises(AuthenticationError) as raised:
        decode_token(SETTINGS, signed(iat=now - 120, exp=now - CLOCK_LEEWAY_SECONDS - 5))
    assert raised.value.reason == "token_expired"


# -- rotating the secret ----------------------------------------------------------------------

USER = SessionUser.of("alice", "tenant-a", ["Admin"])
OLD_SECRET = "o" * 40
NEW_SECRET = "n" * 40


def test_during_a_rotation_tokens_of_either_secret_are_accepted_and_the_first_signs() -> None:
    before = Settings(jwt_secret=OLD_SECRET)
    during = Settings(jwt_secret=f"{NEW_SECRET}, {OLD_SECRET}")
    issued_before = issue_token(before, USER)
    issued_during = issue_token(during, USER)
    assert decode_token(during, issued_before).id == USER.id
    assert decode_token(during, issued_during).id == USER.id
    # The new token is signed with the new secret only.
    assert decode_token(Settings(jwt_secret=NEW_SECRET), issued_during).id == USER.id
    with pytest.raises(AuthenticationError) as refused:
        decode_token(before, issued_during)
    assert refused.value.reason == "token_invalid"


def test_after_the_rotation_tokens_of_the_old_secret_are_refused() -> None:
    issued_before = issue_token(Settings(jwt_secret=OLD_SECRET), USER)
    with pytest.raises(AuthenticationError) as refused:
        decode_token(Settings(jwt_secret=NEW_SECRET), issued_before)
    assert refused.value.reason == "token_invalid"


def test_an_expired_token_of_the_old_secret_is_still_expired_during_a_rotation() -> None:
    expired = issue_token(Settings(jwt_secret=OLD_SECRET), USER, ttl=-60)
    with pytest.raises(AuthenticationError) as refused:
        decode_token(Settings(jwt_secret=f"{NEW_SECRET},{OLD_SECRET}"), expired)
    assert refused.value.reason == "token_expired"


def test_every_secret_of_a_rotation_must_be_long_enough() -> None:
    problems = signing_problems(Settings(jwt_secret=f"{NEW_SECRET},short"))
    assert len(problems) == 1
    assert problems[0].startswith("secret 2 of ASANOHA_JWT_SECRET is 5 bytes long")
