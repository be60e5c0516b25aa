"""Bearer authentication of HTTP requests: the ``Authorization`` header to a ``SessionUser``.

The tenant of every call comes from the token, never from the payload. Tokens are checked by
the application's ``TokenVerifier`` (``platform/identity``): the platform's own HS tokens,
an identity provider's tokens, personal access tokens, and revocations. ``issue_token`` and
``decode_token`` take bare settings for tools and tests that have no application.
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from asanoha.platform.errors import AuthenticationError, Reasons
from asanoha.platform.identity import TokenVerifier
from asanoha.platform.identity.claims import MAX_ID_LENGTH, MAX_ROLES
from asanoha.platform.identity.verifier import CLOCK_LEEWAY_SECONDS, TokenRefusedError
from asanoha.platform.model import SessionUser
from asanoha.platform.settings import Settings

__all__ = [
    "CLOCK_LEEWAY_SECONDS",
    "MAX_ID_LENGTH",
    "MAX_ROLES",
    "TokenRefusedError",
    "authenticate",
    "authenticate_request",
    "bearer_token",
    "decode_token",
    "issue_token",
    "verifier_of",
]


def verifier_of(source: Settings | TokenVerifier) -> TokenVerifier:
    """The verifier itself, or one of bare settings (own secrets and the provider's keys,
    without revocations or personal access tokens, which need the application's database)."""
    return source if isinstance(source, TokenVerifier) else TokenVerifier(source)


def issue_token(
    source: Settings | TokenVerifier, user: SessionUser, ttl: float | None = None
) -> str:
    """A signed token for ``user``, valid for ``ttl`` seconds (default ``jwt_ttl_seconds``).

    Raises ``TokenRefusedError`` for a token ``decode_token`` would refuse: one holding the
    ``system`` role, or living longer than ``jwt_max_ttl_seconds``.
    """
    return verifier_of(source).issue(user, ttl)


def decode_token(source: Settings | TokenVerifier, token: str) -> SessionUser:
    """The user a token names; raises ``AuthenticationError`` (``token_expired``,
    ``token_invalid`` with ``details.cause``, ``token_revoked``)."""
    return verifier_of(source).verify(token)


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


async def authenticate_request(
    verifier: TokenVerifier, request: Request, *, allow_anonymous: bool = False
) -> SessionUser:
    """``authenticate`` for an endpoint, of its ``Authorization`` header."""
    return await authenticate_off_loop(
        verifier, request.headers.get("authorization"), allow_anonymous=allow_anonymous
    )


async def authenticate_off_loop(
    verifier: TokenVerifier, authorization: str | None, *, allow_anonymous: bool = False
) -> SessionUser:
    """``authenticate`` in a worker thread when checking may wait on the identity provider
    or the database, so the event loop never does."""
    if verifier.may_block and authorization:
        return await run_in_threadpool(
            authenticate, verifier, authorization, allow_anonymous=allow_anonymous
        )
    return authenticate(verifier, authorization, allow_anonymous=allow_anonymous)


def authenticate(
    source: Settings | TokenVerifier,
    authorization: str | None,
    *,
    allow_anonymous: bool = False,
) -> SessionUser:
    """The caller of a request.

    Without a token: the anonymous user of the default tenant when ``allow_anonymous`` (the
    handler is public), else ``AuthenticationError`` (``token_missing``). A token that is
    sent is always checked, even for a public handler.
    """
    verifier = verifier_of(source)
    token = bearer_token(authorization)
    if token is None:
        if allow_anonymous:
            return SessionUser.anonymous(verifier.settings.default_tenant)
        raise AuthenticationError(Reasons.TOKEN_MISSING)
    return verifier.verify(token)
