"""JWT bearer authentication: tokens carry ``sub``, ``tenant``, ``roles`` and ``exp``.

The tenant of every call comes from the token, never from the payload. A token may not claim
a lifetime above ``jwt_max_ttl_seconds``, nor the ``system`` role: that is the platform's own
identity for jobs and consumers.
"""

from __future__ import annotations

import re
import time
from typing import Any

import jwt

from asanoha.platform.errors import AuthenticationError, Reasons
from asanoha.platform.model import SYSTEM_ROLE, SessionUser
from asanoha.platform.model.place import with_place_claims
from asanoha.platform.settings import Settings

REQUIRED_CLAIMS = ("sub", "tenant", "exp")
#: The width of the tenant and user columns (tenant_id, created_by, ...): a longer id could
#: not be recorded with a write, so it is refused here rather than blamed on the payload.
MAX_ID_LENGTH = 64
MAX_ROLES = 100
#: Seconds the clocks of the issuer and this server may differ by: applied to ``exp``, to a
#: future ``iat`` and to the lifetime a token claims.
CLOCK_LEEWAY_SECONDS = 30
# Printable text only: no control characters (NUL included) and no lone surrogates.
_IDENTIFIER = re.compile(f"[^\\x00-\\x1f\\x7f\\ud800-\\udfff]{{1,{MAX_ID_LENGTH}}}")


class TokenRefusedError(ValueError):
    """A token the platform would refuse to accept: do not issue it."""


def issue_token(settings: Settings, user: SessionUser, ttl: float | None = None) -> str:
    """A signed token for ``user``, valid for ``ttl`` seconds (default ``jwt_ttl_seconds``).

    Raises ``TokenRefusedError`` for a token ``decode_token`` would refuse: one holding the
    ``system`` role, or living longer than ``jwt_max_ttl_seconds``.
    """
    now = int(time.time())
    lifetime = settings.jwt_ttl_seconds if ttl is None else ttl
    if SYSTEM_ROLE in user.roles:
        raise TokenRefusedError(_SYSTEM_ROLE_REFUSED)
    if lifetime > settings.jwt_max_ttl_seconds:
        raise TokenRefusedError(
            f"a token may live at most {settings.jwt_max_ttl_seconds} seconds "
            f"(ASANOHA_JWT_MAX_TTL_SECONDS), not {lifetime:g}"
        )
    claims = {
        "sub": user.id,
        "tenant": user.tenant_id,
        "roles": sorted(user.roles),
        "iat": now,
        "exp": int(now + lifetime),
    }
    if user.agent is not None:
        claims["agent"] = user.agent
    return jwt.encode(claims, settings.jwt_signing_secret, algorithm=settings.jwt_algorithm)


def decode_token(settings: Settings, token: str) -> SessionUser:
    """The user a token names.

    Raises ``AuthenticationError`` with reason ``token_expired`` or ``token_invalid`` (bad
    signature, another algorithm than the configured one, missing or malformed claims, an
    ``iat`` in the future, a lifetime above ``jwt_max_ttl_seconds``, the ``system`` role).
    """
    now = time.time()
    try:
        claims = _verified_claims(settings, token)
    except jwt.ExpiredSignatureError as exc:
        raise AuthenticationError(Reasons.TOKEN_EXPIRED) from exc
    except jwt.ImmatureSignatureError as exc:
        raise AuthenticationError(
            Reasons.TOKEN_INVALID,
            error=f"claim 'iat' or 'nbf' lies more than {CLOCK_LEEWAY_SECONDS} seconds in the "
            "future: the issuer's clock is ahead, or the token is forged",
        ) from exc
    except jwt.InvalidTokenError as exc:
        raise AuthenticationError(
            Reasons.TOKEN_INVALID, error=str(exc) or type(exc).__name__
        ) from exc
    _check_lifetime(settings, claims, now)
    return _user_from_claims(claims)


def _verified_claims(settings: Settings, token: str) -> dict[str, Any]:
    """The claims of ``token`` checked with the first secret whose signature matches (several
    while a secret is rotated); raises PyJWT's errors."""
    *earlier, last = settings.jwt_secrets
    for secret in earlier:
        try:
            return _decode(settings, token, secret)
        except jwt.InvalidSignatureError:
            continue
    return _decode(settings, token, last)


def _decode(settings: Settings, token: str, secret: str) -> dict[str, Any]:
    claims: dict[str, Any] = jwt.decode(
        token,
        secret,
        # Exactly one algorithm: a token signed with "none" or another HMAC is refused.
        algorithms=[settings.jwt_algorithm],
        options={"require": list(REQUIRED_CLAIMS)},
        # Also refuses an ``iat`` more than the leeway in the future.
        leeway=CLOCK_LEEWAY_SECONDS,
    )
    return claims


def _check_lifetime(settings: Settings, claims: dict[str, Any], now: float) -> None:
    """Refuse a token that claims to live longer than ``jwt_max_ttl_seconds``: counted from
    ``iat``, or from now without one (so a token without ``iat`` cannot claim more either)."""
    # jwt.decode checked that both are integers (or numbers that convert to one).
    expires = int(claims["exp"])
    lifetime: float
    if "iat" in claims:
        # Both from the issuer's clock: no leeway.
        lifetime, start, allowed = expires - int(claims["iat"]), "'iat'", 0
    else:
        lifetime, start, allowed = expires - now, "now", CLOCK_LEEWAY_SECONDS
    if lifetime > settings.jwt_max_ttl_seconds + allowed:
        raise AuthenticationError(
            Reasons.TOKEN_INVALID,
            error=f"the token claims to live {lifetime:.0f} seconds ('exp' minus {start}); "
            f"tokens may live at most {settings.jwt_max_ttl_seconds} seconds "
            "(ASANOHA_JWT_MAX_TTL_SECONDS): issue a shorter-lived one",
        )


def _user_from_claims(claims: dict[str, Any]) -> SessionUser:
    subject = _identifier(claims.get("sub"), "sub")
    tenant = _identifier(claims.get("tenant"), "tenant")
    roles = claims.get("roles", [])
    if (
        not isinstance(roles, list)
        or len(roles) > MAX_ROLES
        or not all(isinstance(role, str) and _IDENTIFIER.fullmatch(role) for role in roles)
    ):
        raise AuthenticationError(
            Reasons.TOKEN_INVALID,
            error=f"claim 'roles' must be a list of at most {MAX_ROLES} role names "
            f"(1 to {MAX_ID_LENGTH} printable characters each)",
        )
    if SYSTEM_ROLE in roles:
        raise AuthenticationError(Reasons.TOKEN_INVALID, error=_SYSTEM_ROLE_REFUSED)
    user = with_place_claims(SessionUser.of(subject, tenant, roles), claims)
    agent = claims.get("agent")
    if agent is None or agent is False:
        return user
    if agent is True or (isinstance(agent, str) and agent):
        # An agent principal: the claim names its run (``true`` when the issuer names none).
        return user.as_agent("agent" if agent is True else agent)
    raise AuthenticationError(
        Reasons.TOKEN_INVALID, error="claim 'agent' must be a non-empty string or true"
    )


_SYSTEM_ROLE_REFUSED = (
    f"claim 'roles' may not hold {SYSTEM_ROLE!r}: it is the platform's own identity for jobs "
    "and consumers, never a caller's; give an operator the SystemAdmin role instead"
)


def _identifier(value: Any, claim: str) -> str:
    if not isinstance(value, str) or not _IDENTIFIER.fullmatch(value):
        raise AuthenticationError(
            Reasons.TOKEN_INVALID,
            error=f"claim {claim!r} must be a string of 1 to {MAX_ID_LENGTH} printable characters",
        )
    return value


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header; ``None`` when there is none.

    Raises ``AuthenticationError`` (``token_invalid``) for another scheme or an empty token.
    """
    if authorization is None or not authorization.strip():
        return None
    scheme, _, token = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise AuthenticationError(
            Reasons.TOKEN_INVALID, error="send 'Authorization: Bearer <token>'"
        )
    return token.strip()


def authenticate(
    settings: Settings, authorization: str | None, *, allow_anonymous: bool = False
) -> SessionUser:
    """The caller of a request.

    Without a token: the anonymous user of the default tenant when ``allow_anonymous`` (the
    handler is public), else ``AuthenticationError`` (``token_missing``). A token that is
    sent is always checked, even for a public handler.
    """
    token = bearer_token(authorization)
    if token is None:
        if allow_anonymous:
            return SessionUser.anonymous(settings.default_tenant)
        raise AuthenticationError(Reasons.TOKEN_MISSING)
    return decode_token(settings, token)
