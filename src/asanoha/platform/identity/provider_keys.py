"""The identity provider's public keys: its JSON Web Key Set, fetched and cached.

The set is fetched again after ``refresh`` seconds, and when a token names a ``kid`` the
cache lacks, at most once per ``UNKNOWN_KID_INTERVAL`` seconds: forged ``kid``s cannot make
this process hammer the provider. A provider that cannot be reached, or answers something
that is not a key set, leaves the cached keys in place: a good token never fails because
the provider is down.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import jwt
from jwt.api_jwk import PyJWK

from asanoha.platform.identity.algorithms import algorithms_for

#: Seconds between two fetches caused by unknown ``kid``s.
UNKNOWN_KID_INTERVAL = 30.0
#: Seconds one fetch (discovery or key set) may take.
FETCH_TIMEOUT = 3.0
#: The largest key set or discovery document read.
MAX_DOCUMENT_BYTES = 512 * 1024
DISCOVERY_PATH = "/.well-known/openid-configuration"

log = logging.getLogger("asanoha.identity")

#: Reads a URL and returns its body; raises ``OSError`` (or any ``Exception``) when it cannot.
Fetch = Callable[[str], bytes]


def fetch_url(url: str) -> bytes:
    """The body of ``url`` (at most ``MAX_DOCUMENT_BYTES``), within ``FETCH_TIMEOUT``."""
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    with urllib.request.urlopen(request, timeout=FETCH_TIMEOUT) as response:
        body: bytes = response.read(MAX_DOCUMENT_BYTES + 1)
    if len(body) > MAX_DOCUMENT_BYTES:
        raise ValueError(f"{url} answered more than {MAX_DOCUMENT_BYTES} bytes")
    return body


@dataclass(frozen=True)
class ProviderKey:
    """One public key of the provider and the algorithms it may verify."""

    kid: str
    key: Any
    algorithms: frozenset[str]


class ProviderKeys:
    """The keys of one provider by ``kid``, from ``jwks_url`` or discovered from ``issuer``."""

    def __init__(
        self,
        *,
        jwks_url: str | None = None,
        issuer: str | None = None,
        refresh: float = 300.0,
        fetch: Fetch = fetch_url,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not jwks_url and not issuer:
            raise ValueError("ProviderKeys needs a jwks_url or an issuer to discover it from")
        self._jwks_url = jwks_url
        self._issuer = issuer
        self._refresh = refresh
        self._fetch = fetch
        self._clock = clock
        self._lock = threading.Lock()
        self._keys: dict[str, ProviderKey] = {}
        self._fetched_at: float | None = None
        self._attempted_at: float | None = None
        self._unknown_kid_fetch_at: float | None = None
        #: How many times the key set was fetched (discovery not counted).
        self.fetch_count = 0

    def key_for(self, kid: str | None) -> ProviderKey | None:
        """The key ``kid`` names (without a ``kid``: the only key of a one-key set), or
        ``None`` when the provider has none such."""
        with self._lock:
            now = self._clock()
            if self._is_due(now):
                self._load(now)
            found = self._lookup(kid)
            if found is None and self._may_fetch_for_unknown_kid(now):
                self._unknown_kid_fetch_at = now
                self._load(now)
                found = self._lookup(kid)
            return found

    def _lookup(self, kid: str | None) -> ProviderKey | None:
        if kid is None:
            return next(iter(self._keys.values())) if len(self._keys) == 1 else None
        return self._keys.get(kid)

    def _is_due(self, now: float) -> bool:
        if self._attempted_at is None:
            return True
        # A failed fetch is retried on the unknown-kid schedule, not on every call.
        since = self._fetched_at if self._fetched_at is not None else self._attempted_at
        return now - since >= self._refresh and now - self._attempted_at >= UNKNOWN_KID_INTERVAL

    def _may_fetch_for_unknown_kid(self, now: float) -> bool:
        last = max(
            self._unknown_kid_fetch_at if self._unknown_kid_fetch_at is not None else -1e18,
            self._attempted_at if self._attempted_at is not None else -1e18,
        )
        return now - last >= UNKNOWN_KID_INTERVAL

    def _load(self, now: float) -> None:
        """Fetch the key set; on any failure keep the keys held so far."""
        self._attempted_at = now
        try:
            url = self._jwks_url or self._discover()
            self.fetch_count += 1
            keys = parse_key_set(json.loads(self._fetch(url)))
        except Exception as exc:
            log.warning("identity provider keys not refreshed (cached keys kept): %s", exc)
            return
        self._keys = keys
        self._fetched_at = now

    def _discover(self) -> str:
        assert self._issuer is not None
        document = json.loads(self._fetch(self._issuer.rstrip("/") + DISCOVERY_PATH))
        url = document.get("jwks_uri") if isinstance(document, Mapping) else None
        if not isinstance(url, str) or not url:
            raise ValueError(f"the discovery document of {self._issuer} names no jwks_uri")
        # Found once: the provider's key set does not move.
        self._jwks_url = url
        return url


def parse_key_set(document: Any) -> dict[str, ProviderKey]:
    """The signing keys of a JSON Web Key Set by ``kid``; keys that cannot be used
    (another use, an unsupported type, malformed) are left out. Raises ``ValueError`` for a
    document that is no key set at all."""
    if not isinstance(document, Mapping) or not isinstance(document.get("keys"), list):
        raise ValueError("the key set is not an object with a 'keys' list")
    keys: dict[str, ProviderKey] = {}
    for number, entry in enumerate(document["keys"]):
        if not isinstance(entry, Mapping) or entry.get("use", "sig") != "sig":
            continue
        if entry.get("kty") == "oct":
            # A shared secret published in a key set would let anyone sign.
            continue
        algorithms = algorithms_for(entry)
        if not algorithms:
            continue
        try:
            # Built for the first algorithm of its type: the key object is the same for all.
            key = PyJWK(dict(entry), algorithm=sorted(algorithms)[0]).key
        except (jwt.PyJWKError, jwt.InvalidKeyError, ValueError, TypeError, KeyError):
            continue
        kid = entry.get("kid")
        name = kid if isinstance(kid, str) else f"#{number}"
        keys[name] = ProviderKey(name, key, algorithms)
    return keys
