"""The console's session: the principal's token in an HttpOnly, SameSite=Strict cookie, and
a CSRF token derived from it that every form sends back.

The cookie holds the bearer token itself, so the session ends when the token expires, or
at logout, which revokes the token (by its ``jti``) for the console and the API alike. The CSRF token is an HMAC of the session's token under the
signing secret: a page of another site can neither read the cookie nor compute the field.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import secrets
import time

from starlette.requests import Request
from starlette.responses import Response

from asanoha.platform.errors import AccessDeniedError, AsanohaError, Reasons
from asanoha.platform.http.auth import decode_token
from asanoha.platform.identity import TokenVerifier
from asanoha.platform.model import SessionUser
from asanoha.platform.settings import Settings

#: The cookie that holds the signed-in principal's token.
SESSION_COOKIE = "asanoha_console"
#: The cookie and form field that tie a login form to the browser that loaded it.
LOGIN_COOKIE = "asanoha_console_login"
#: How long the cookie of a session without a readable ``exp`` lives.
SESSION_COOKIE_SECONDS = 8 * 3600
#: The form field that carries the CSRF token.
CSRF_FIELD = "csrf"
#: The role a principal needs to sign in.
CONSOLE_ROLE = "SystemAdmin"


class Session:
    """A signed-in principal: who it is, the token it signed in with, and its CSRF token."""

    def __init__(self, user: SessionUser, token: str, csrf: str) -> None:
        self.user = user
        self.token = token
        self.csrf = csrf


def csrf_token(settings: Settings, token: str) -> str:
    """The CSRF token of the session that holds ``token``."""
    key = settings.jwt_signing_secret.encode()
    return hmac.new(key, b"asanoha-console-csrf:" + token.encode(), hashlib.sha256).hexdigest()


def current_session(tokens: TokenVerifier, request: Request) -> Session | None:
    """The session of ``request``: ``None`` without a cookie, or with a token that is
    expired, invalid or lacks the console role."""
    token = request.cookies.get(SESSION_COOKIE)
    if not token:
        return None
    try:
        user = signed_in_user(tokens, token)
    except AsanohaError:
        return None
    return Session(user, token, csrf_token(tokens.settings, token))


def signed_in_user(tokens: TokenVerifier, token: str) -> SessionUser:
    """The principal ``token`` names, when it may use the console.

    Raises ``AuthenticationError`` for a token the API would refuse (expired, bad
    signature, ...), ``AccessDeniedError`` (``role_required``) for one without the
    ``SystemAdmin`` role.
    """
    user = decode_token(tokens, token)
    if CONSOLE_ROLE not in user.roles:
        raise AccessDeniedError(Reasons.ROLE_REQUIRED, roles=[CONSOLE_ROLE])
    return user


def has_valid_csrf(session: Session, sent: object) -> bool:
    """Whether the form sent the session's CSRF token."""
    return isinstance(sent, str) and hmac.compare_digest(sent, session.csrf)


def start_session(
    response: Response, request: Request, token: str, path: str, settings: Settings
) -> None:
    """Keep ``token`` in the session cookie until it expires."""
    response.set_cookie(
        SESSION_COOKIE,
        token,
        max_age=_seconds_left(token),
        path=path,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    response.delete_cookie(LOGIN_COOKIE, path=path)


def revoke_session_token(tokens: TokenVerifier, session: Session) -> None:
    """Revoke the token the session holds (by its ``jti``), so that a copy of the cookie
    is refused after logout by the console and the API. A token without a ``jti`` cannot
    be revoked: it stays valid until it expires."""
    user = session.user
    if user.token_id is None or tokens.revocations is None:
        return
    expires = user.token_expires if user.token_expires is not None else int(time.time())
    tokens.revocations.revoke(
        user.tenant_id,
        user.token_id,
        expires_at=dt.datetime.fromtimestamp(expires, dt.UTC),
        revoked_by=user.id,
    )


def end_session(response: Response, path: str) -> None:
    """Forget the session cookie."""
    response.delete_cookie(SESSION_COOKIE, path=path, httponly=True, samesite="strict")


def login_nonce(request: Request) -> str:
    """The nonce of this browser's login form: the one its cookie holds, or a new one."""
    return request.cookies.get(LOGIN_COOKIE) or secrets.token_urlsafe(24)


def keep_login_nonce(response: Response, request: Request, nonce: str, path: str) -> None:
    """Keep the login form's nonce in a cookie, which the login compares with the form."""
    response.set_cookie(
        LOGIN_COOKIE,
        nonce,
        max_age=3600,
        path=path,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


def has_valid_login_nonce(request: Request, sent: object) -> bool:
    """Whether the login form sent the nonce of this browser's login cookie."""
    kept = request.cookies.get(LOGIN_COOKIE)
    return bool(kept) and isinstance(sent, str) and hmac.compare_digest(sent, kept or "")


def _seconds_left(token: str) -> int:
    """How long the token is still valid: the cookie lives no longer. A personal access
    token (no JWT) is checked on every page; its cookie lives for the session."""
    import jwt

    try:
        claims = jwt.decode(token, options={"verify_signature": False})
        return max(0, int(claims["exp"]) - int(time.time()))
    except (jwt.InvalidTokenError, KeyError, TypeError, ValueError):
        return SESSION_COOKIE_SECONDS
