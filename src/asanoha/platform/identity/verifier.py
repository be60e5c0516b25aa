"""``TokenVerifier``: the one place a bearer token becomes a ``SessionUser``.

A token is checked with the key its header names, and the key fixes the algorithm:
``HS*`` tokens only with the platform's own secrets (``ASANOHA_JWT_KEYS`` by ``kid``,
``ASANOHA_JWT_SECRET`` without one), every other algorithm only with the identity
provider's public keys, and only with an algorithm of the key's type. ``none`` is refused.
``exp`` is required and must be an integer NumericDate within ``jwt_max_ttl_seconds``;
``nbf`` and ``iat`` are checked, and ``iss`` and ``aud`` when configured. A token is looked
up in the revocations by its ``jti`` (one without: by its digest); a personal access token
in its table. Every
refusal is an ``AuthenticationError`` (401) whose ``details.cause`` says what failed.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from typing import Any

import jwt

from asanoha.platform.errors import AuthenticationError, Reasons
from asanoha.platform.identity.access_tokens import ACCESS_TOKEN_PREFIX, AccessTokenStore
from asanoha.platform.identity.claims import (
    OWN_CLAIMS,
    SYSTEM_ROLE_REFUSED,
    ClaimMap,
    refused,
    user_from_claims,
)
from asanoha.platform.identity.own_keys import OwnKeys
from asanoha.platform.identity.provider_keys import ProviderKeys
from asanoha.platform.identity.revocations import RevocationList
from asanoha.platform.model import SYSTEM_ROLE, SessionUser
from asanoha.platform.settings import Settings

#: Seconds the clocks of the issuer and this server may differ by: applied to ``exp``, to a
#: future ``iat`` or ``nbf`` and to the lifetime a token claims.
CLOCK_LEEWAY_SECONDS = 30
#: The last second of the year 9999: the latest ``iat`` or ``nbf`` taken (and the latest
#: ``exp`` a lifetime is reckoned to).
LAST_NUMERIC_DATE = 253_402_300_799
#: The id of a token without a ``jti``: this prefix and the SHA-256 of the token.
UNNAMED_TOKEN_PREFIX = "sha256:"


class TokenRefusedError(ValueError):
    """A token the platform would refuse to accept: do not issue it."""


class TokenVerifier:
    """Checks bearer tokens for one application (its settings, its provider's keys, its
    revocations and personal access tokens), and signs its own."""

    def __init__(
        self,
        settings: Settings,
        *,
        provider: ProviderKeys | None = None,
        revocations: RevocationList | None = None,
        access_tokens: AccessTokenStore | None = None,
    ) -> None:
        self.settings = settings
        self.own = OwnKeys.of(settings)
        if provider is None and (settings.jwt_jwks_url or settings.oidc_issuer):
            provider = ProviderKeys(
                jwks_url=settings.jwt_jwks_url,
                issuer=settings.oidc_issuer,
                refresh=settings.jwt_jwks_refresh,
            )
        self.provider = provider
        self.provider_claims = ClaimMap.of(settings)
        self.revocations = revocations
        self.access_tokens = access_tokens

    @property
    def may_block(self) -> bool:
        """Whether checking a token may wait on the network or the database (call it from a
        worker thread, not an event loop)."""
        return (
            self.provider is not None
            or self.revocations is not None
            or self.access_tokens is not None
        )

    # -- signing -------------------------------------------------------------------------

    def issue(self, user: SessionUser, ttl: float | None = None) -> str:
        """A token for ``user`` signed with the ring's signing key, valid for ``ttl`` seconds
        (default ``jwt_ttl_seconds``), with a fresh ``jti``.

        Raises ``TokenRefusedError`` for a token ``verify`` would refuse: one holding the
        ``system`` role, or living longer than ``jwt_max_ttl_seconds``.
        """
        settings = self.settings
        now = int(time.time())
        lifetime = settings.jwt_ttl_seconds if ttl is None else ttl
        if SYSTEM_ROLE in user.roles:
            raise TokenRefusedError(SYSTEM_ROLE_REFUSED)
        if lifetime > settings.jwt_max_ttl_seconds:
            raise TokenRefusedError(
                f"a token may live at most {settings.jwt_max_ttl_seconds} seconds "
                f"(ASANOHA_JWT_MAX_TTL_SECONDS), not {lifetime:g}"
            )
        claims: dict[str, Any] = {
            "sub": user.id,
            "tenant": user.tenant_id,
            "roles": sorted(user.roles),
            "iat": now,
            "exp": int(now + lifetime),
            "jti": uuid.uuid4().hex,
        }
        if settings.jwt_expected_issuer:
            claims["iss"] = settings.jwt_expected_issuer
        if settings.jwt_audience:
            claims["aud"] = settings.jwt_audience
        if user.agent is not None:
            claims["agent"] = user.agent
        if self.own.signing is None:
            raise TokenRefusedError(
                "this application signs no tokens of its own: set ASANOHA_JWT_SECRET or "
                "ASANOHA_JWT_KEYS (its tokens come from the identity provider)"
            )
        kid, secret = self.own.signing
        headers = {"kid": kid} if kid is not None else None
        return jwt.encode(claims, secret, algorithm=self.own.algorithm, headers=headers)

    # -- checking ------------------------------------------------------------------------

    def verify(self, token: str) -> SessionUser:
        """The user ``token`` names; raises ``AuthenticationError`` (``token_expired``,
        ``token_invalid`` with ``details.cause``, ``token_revoked``)."""
        if token.startswith(ACCESS_TOKEN_PREFIX):
            if self.access_tokens is None:
                raise refused("unknown_token", "personal access tokens are not served here")
            return self.access_tokens.user_of(token)
        claims, names = self._verified_claims(token)
        user = user_from_claims(claims, names)
        jti = claims.get("jti")
        if jti is not None and not (isinstance(jti, str) and 0 < len(jti) <= 200):
            raise refused("claims", "claim 'jti' must be a string of 1 to 200 characters")
        if jti is None:
            # Many providers issue access tokens without a jti: the token's digest names it,
            # so a sign-out (or a revocation of the caller's own token) still ends it.
            jti = UNNAMED_TOKEN_PREFIX + hashlib.sha256(token.encode()).hexdigest()
        revocations = self.revocations
        if revocations is not None and revocations.is_revoked(user.tenant_id, jti):
            raise AuthenticationError(Reasons.TOKEN_REVOKED, jti=jti)
        return user.with_token(jti, int(claims["exp"]))

    def is_revoked(self, user: SessionUser) -> bool:
        """Whether the token ``user`` was verified from has been revoked since (as of the
        revocations' cache: a personal access token's revocation is among them too)."""
        revocations = self.revocations
        token_id = user.token_id
        return (
            revocations is not None
            and token_id is not None
            and revocations.is_revoked(user.tenant_id, token_id)
        )

    def claims_of(self, token: str) -> dict[str, Any]:
        """The verified claims of a JWT (not of a personal access token)."""
        return self._verified_claims(token)[0]

    def _verified_claims(self, token: str) -> tuple[dict[str, Any], ClaimMap]:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.InvalidTokenError as exc:
            raise refused("malformed", f"not a JSON Web Token: {exc}") from exc
        alg = header.get("alg")
        kid = header.get("kid")
        if not isinstance(alg, str) or alg.lower() == "none":
            raise refused("algorithm", "the token is unsigned (alg 'none'): sign it")
        if kid is not None and not isinstance(kid, str):
            raise refused("malformed", "header 'kid' must be a string")
        if alg.startswith("HS"):
            return self._own_claims(token, alg, kid)
        return self._provider_claims(token, alg, kid), self.provider_claims

    def _own_claims(self, token: str, alg: str, kid: str | None) -> tuple[dict[str, Any], ClaimMap]:
        # Only the platform's own secrets check HMAC tokens: never a provider's public key.
        if alg != self.own.algorithm:
            raise refused(
                "algorithm",
                f"the token is signed with {alg}; this server's own tokens use "
                f"{self.own.algorithm} (ASANOHA_JWT_ALGORITHM)",
            )
        secrets = self.own.secrets_for(kid)
        if not secrets and kid is None:
            raise refused(
                "unknown_kid",
                "this application takes no HS token without a kid: its own secret is unset "
                "(ASANOHA_JWT_SECRET) beside the identity provider",
            )
        if not secrets:
            raise refused("unknown_kid", f"no own key has kid {kid!r} (ASANOHA_JWT_KEYS)")
        *earlier, last = secrets
        for secret in earlier:
            try:
                claims = self._decode(token, secret, alg)
                break
            except jwt.InvalidSignatureError:
                continue
        else:
            try:
                claims = self._decode(token, last, alg)
            except jwt.InvalidSignatureError as exc:
                raise refused("signature", "the signature does not match") from exc
        # Own tokens name the tenant ``tenant``; one minted with the provider's claim names
        # (an HS token from a gateway) is read with those.
        if "tenant" in claims:
            return claims, OWN_CLAIMS
        names = self.provider_claims
        return claims, ClaimMap(names.subject, names.tenant, names.roles, requires_roles=False)

    def _provider_claims(self, token: str, alg: str, kid: str | None) -> dict[str, Any]:
        if self.provider is None:
            raise refused(
                "algorithm",
                f"the token is signed with {alg}: this server checks provider tokens only "
                "with ASANOHA_JWT_JWKS_URL or ASANOHA_OIDC_ISSUER set",
            )
        key = self.provider.key_for(kid)
        if key is None:
            raise refused("unknown_kid", f"the identity provider has no key with kid {kid!r}")
        if alg not in key.algorithms:
            raise refused(
                "algorithm",
                f"the token is signed with {alg}, but key {key.kid!r} verifies only "
                f"{', '.join(sorted(key.algorithms))}",
            )
        try:
            return self._decode(token, key.key, alg)
        except jwt.InvalidSignatureError as exc:
            raise refused("signature", f"the signature does not match key {key.kid!r}") from exc

    def _decode(self, token: str, key: Any, alg: str) -> dict[str, Any]:
        """Verify signature and registered claims; PyJWT's errors become refusals, except
        ``InvalidSignatureError``, which the caller may try the next secret on."""
        settings = self.settings
        issuer = settings.jwt_expected_issuer
        audience = settings.jwt_audience
        required = ["exp", *(["iss"] if issuer else []), *(["aud"] if audience else [])]
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=[alg],
                issuer=issuer,
                audience=audience,
                options={"require": required},
                leeway=CLOCK_LEEWAY_SECONDS,
            )
        except jwt.InvalidSignatureError:
            raise
        except jwt.ExpiredSignatureError as exc:
            raise AuthenticationError(Reasons.TOKEN_EXPIRED) from exc
        except jwt.ImmatureSignatureError as exc:
            raise refused(
                "not_yet_valid",
                f"claim 'iat' or 'nbf' lies more than {CLOCK_LEEWAY_SECONDS} seconds in the "
                "future: the issuer's clock is ahead, or the token is forged",
            ) from exc
        except jwt.MissingRequiredClaimError as exc:
            raise refused(_missing_cause(exc.claim), str(exc)) from exc
        except jwt.InvalidIssuerError as exc:
            raise refused("issuer", f"{exc}: this server accepts iss {issuer!r}") from exc
        except jwt.InvalidAudienceError as exc:
            wanted = audience or "none (set ASANOHA_JWT_AUDIENCE)"
            raise refused("audience", f"{exc}: this server accepts aud {wanted}") from exc
        except jwt.InvalidTokenError as exc:
            raise refused("malformed", str(exc) or type(exc).__name__) from exc
        self._check_dates(claims)
        return claims

    def _check_dates(self, claims: dict[str, Any]) -> None:
        """``exp`` an integer (PyJWT also takes ``"1700000000"`` and ``1.7e9``), ``iat`` and
        ``nbf`` numbers from 1970 to 9999, and a lifetime within ``jwt_max_ttl_seconds``."""
        expires = claims["exp"]
        for name in ("exp", "iat", "nbf"):
            value = claims.get(name)
            if value is not None and (
                not isinstance(value, int | float) or isinstance(value, bool)
            ):
                raise refused("claims", f"claim {name!r} must be a NumericDate (a number)")
            # JSON integers have no bound: one far past any date would overflow the
            # arithmetic below (a 500, not a refusal). A late ``exp`` is a long lifetime.
            late = name != "exp" and value is not None and value > LAST_NUMERIC_DATE
            if value is not None and (value < 0 or late):
                raise refused(
                    "claims",
                    f"claim {name!r} must be a NumericDate between 0 and {LAST_NUMERIC_DATE}",
                )
        maximum = self.settings.jwt_max_ttl_seconds
        bounded = min(expires, LAST_NUMERIC_DATE)
        lifetime: float
        if "iat" in claims:
            # Both from the issuer's clock: no leeway.
            lifetime, start, allowed = bounded - claims["iat"], "'iat'", 0
        else:
            lifetime, start, allowed = bounded - time.time(), "now", CLOCK_LEEWAY_SECONDS
        if lifetime > maximum + allowed:
            more = "more than " if expires > bounded else ""
            raise refused(
                "lifetime",
                f"the token claims to live {more}{lifetime:.0f} seconds ('exp' minus {start}); "
                f"tokens may live at most {maximum} seconds (ASANOHA_JWT_MAX_TTL_SECONDS): "
                "issue a shorter-lived one",
            )
        if not isinstance(expires, int):
            raise refused("claims", "claim 'exp' must be an integer NumericDate")


def _missing_cause(claim: str) -> str:
    return {"iss": "issuer", "aud": "audience"}.get(claim, "claims")
