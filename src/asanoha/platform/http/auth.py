"""JWT bearer authentication: tokens carry ``sub``, ``tenant``, ``roles`` and ``exp``.

The tenant of every call comes from the token, never from the payload.
"""

from __future__ import annotations

import re
import time
from typing import Any

import jwt

from asanoha.platform.errors import AuthenticationError, Reasons
from asanoha.platform.model import SessionUser
from asanoha.platform.settings import Settings

REQUIRED_CLAIMS = ("sub", "tenant", "exp")
#: The width of the tenant and user columns (tenant_id, created_by, ...): a longer id could
#: not be recorded with a write, so it is refused here rather than blamed on the payload.
MAX_ID_LENGTH = 64
MAX_ROLES = 100
# Printable text only: no control characters (NUL included) and no lone surrogates.
_IDENTIFIER = re.compile(f"[^\\x00-\\x1f\\x7f\\ud800-\\udfff]{{1,{MAX_ID_LENGTH}}}")


def issue_token(settings: Settings, user: SessionUser, ttl: float | None = None) -> str:
    """A signed token for ``user``, valid for ``ttl`` seconds (default ``jwt_ttl_seconds``)."""
    now = int(time.time())
    lifetime = settings.jwt_ttl_seconds if ttl is None else ttl
    claims = {
        "sub": user.id,
        "tenant": user.tenant_id,
        "roles": sorted(user.roles),
        "iat": now,
        "exp": int(now + lifetime),
    }
    if user.agent is not None:
        claims["agent"] = user.agent
    return jwt.encode(claims, settings.jwt_secret, algorithm=settings.jwt_algorithm)


def decode_token(settings: Settings, token: str) -> SessionUser:
    """The user a token names.

    Raises ``AuthenticationError`` with reason ``token_expired`` or ``token_invalid`` (bad
    signature, another algorithm than the configured one, missing or malformed claims).
    """
    try:
        claims: dict[str, Any] = jwt.decode(
            token,
            settings.jwt_secret,
            # Exactly one algorithm: a token signed with "none" or another HMAC is refused.
            algorithms=[settings.jwt_algorithm],
            options={"require": list(REQUIRED_CLAIMS)},
        )
    except jwt.ExpiredSignatureError as exc:
        raise AuthenticationError(Reasons.TOKEN_EXPIRED) from exc
    except jwt.InvalidTokenError as exc:
        raise AuthenticationError(
            Reasons.TOKEN_INVALID, error=str(exc) or type(exc).__name__
        ) from exc
    return _user_from_claims(claims)


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
    user = SessionUser.of(subject, tenant, roles)
    agent = claims.get("agent")
    if agent is None or agent is False:
        return user
    if agent is True or (isinstance(agent, str) and agent):
        # An agent principal: the claim names its run (``true`` when the issuer names none).
        return user.as_agent("agent" if agent is True else agent)
    raise AuthenticationError(
        Reasons.TOKEN_INVALID, error="claim 'agent' must be a non-empty string or true"
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
