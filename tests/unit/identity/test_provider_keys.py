"""The provider's key set: fetched once, refreshed on schedule, refetched for an unknown
``kid`` at most once per 30 seconds, and kept when the provider is down or answers garbage."""

from __future__ import annotations

import secrets

from asanoha.platform.identity.provider_keys import UNKNOWN_KID_INTERVAL, ProviderKeys
from tests.unit.identity.provider import jwks_server, key_pair


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_random_kids_refetch_at_most_once_per_interval() -> None:
    good = key_pair("ES256")
    clock = Clock()
    with jwks_server([good]) as server:
        keys = ProviderKeys(jwks_url=server.url, refresh=300, clock=clock)
        assert keys.key_for(good.kid) is not None
        assert server.fetches == 1
        for _ in range(200):
            clock.now += 0.1  # 200 requests over 20 seconds
            assert keys.key_for(secrets.token_hex(8)) is None
        assert server.fetches == 1  # the first fetch is less than 30 s old throughout
        clock.now += UNKNOWN_KID_INTERVAL
        for _ in range(200):
            keys.key_for(secrets.token_hex(8))
        assert server.fetches == 2
        assert keys.key_for(good.kid) is not None


def test_a_new_kid_is_found_by_one_refetch() -> None:
    first, added = key_pair("ES256"), key_pair("RS256")
    clock = Clock()
    with jwks_server([first]) as server:
        keys = ProviderKeys(jwks_url=server.url, refresh=300, clock=clock)
        keys.key_for(first.kid)
        server.keys.append(added)
        clock.now += UNKNOWN_KID_INTERVAL
        found = keys.key_for(added.kid)
        assert found is not None and "RS256" in found.algorithms
        assert server.fetches == 2


def test_keys_are_refreshed_after_the_refresh_interval() -> None:
    old, new = key_pair("ES256"), key_pair("EdDSA")
    clock = Clock()
    with jwks_server([old]) as server:
        keys = ProviderKeys(jwks_url=server.url, refresh=300, clock=clock)
        assert keys.key_for(old.kid) is not None
        server.keys[:] = [new]
        clock.now += 299
        assert keys.key_for(old.kid) is not None  # still cached
        clock.now += 1
        assert keys.key_for(old.kid) is None  # rotated out at the refresh
        assert keys.key_for(new.kid) is not None


def test_a_provider_that_goes_down_keeps_the_cached_keys() -> None:
    good = key_pair("RS256")
    clock = Clock()
    with jwks_server([good]) as server:
        keys = ProviderKeys(jwks_url=server.url, refresh=300, clock=clock)
        assert keys.key_for(good.kid) is not None
        server.stop()
        clock.now += 301  # refresh due: the fetch fails
        assert keys.key_for(good.kid) is not None
        clock.now += UNKNOWN_KID_INTERVAL
        assert keys.key_for("unknown") is None
        assert keys.key_for(good.kid) is not None


def test_a_provider_that_answers_garbage_keeps_the_cached_keys() -> None:
    good = key_pair("PS256")
    clock = Clock()
    with jwks_server([good]) as server:
        keys = ProviderKeys(jwks_url=server.url, refresh=300, clock=clock)
        assert keys.key_for(good.kid) is not None
        for mode in ("garbage", "error"):
            server.mode = mode
            clock.now += 301
            assert keys.key_for(good.kid) is not None
        assert server.fetches == 3


def test_a_failed_first_fetch_is_retried_on_the_unknown_kid_schedule() -> None:
    good = key_pair("ES256")
    clock = Clock()
    with jwks_server([good]) as server:
        server.mode = "garbage"
        keys = ProviderKeys(jwks_url=server.url, refresh=300, clock=clock)
        for _ in range(50):
            assert keys.key_for(good.kid) is None
        assert server.fetches == 1
        server.mode = "serve"
        clock.now += UNKNOWN_KID_INTERVAL
        assert keys.key_for(good.kid) is not None
        assert server.fetches == 2


def test_symmetric_and_unusable_keys_in_the_set_are_ignored() -> None:
    from asanoha.platform.identity.provider_keys import parse_key_set

    good = key_pair("EdDSA")
    found = parse_key_set(
        {
            "keys": [
                {"kty": "oct", "kid": "shared", "k": "c2VjcmV0"},
                {"kty": "RSA", "kid": "broken", "n": "!!", "e": "AQAB"},
                {**good.jwk, "use": "enc", "kid": "encryption"},
                good.jwk,
            ]
        }
    )
    assert list(found) == [good.kid]
    assert found[good.kid].algorithms == frozenset({"EdDSA"})
