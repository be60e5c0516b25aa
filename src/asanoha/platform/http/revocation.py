"""``POST /api/auth/revoke``: end a token before it expires.

Without a body the caller's own token is revoked (a sign-out). ``{"jti": "..."}`` names
another token: the caller's own personal access token, or, for an ``Admin``, any token of
the caller's tenant. Revocations live in the database (``identity/revocations.py``), so
every API process refuses the token within seconds, and after a restart too.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI
from starlette.requests import Request

from asanoha.platform.errors import AccessDeniedError, Reasons, ValidationError
from asanoha.platform.http.openapi import BEARER_SCHEME, SchemaCatalogue, json_body
from asanoha.platform.http.routes import json_endpoint
from asanoha.platform.http.wire import ErrorEnvelope, SuccessEnvelope
from asanoha.platform.model import SessionUser

if TYPE_CHECKING:
    from asanoha.platform.http.parts import HttpParts

#: The role that may revoke any token of its tenant.
TENANT_ADMIN_ROLE = "Admin"
MAX_JTI_LENGTH = 200


def add_revoke_route(api: FastAPI, app: HttpParts, catalogue: SchemaCatalogue) -> None:
    """Register ``POST /api/auth/revoke``."""
    tokens = app.tokens

    def call(request: Request, user: SessionUser, body: Any) -> Any:
        jti = _jti_of(body, user)
        store = tokens.access_tokens
        is_admin = TENANT_ADMIN_ROLE in user.roles
        if store is not None:
            owner = None if is_admin else user.id
            found = store.revoke(user.tenant_id, jti, revoked_by=user.id, user_id=owner)
            if found is not None:
                return {"jti": jti, "revoked": True}
        if jti != user.token_id and not is_admin:
            raise AccessDeniedError(
                Reasons.ROLE_REQUIRED, handler="/api/auth/revoke", roles=[TENANT_ADMIN_ROLE]
            )
        revocations = tokens.revocations
        if revocations is None:
            raise RuntimeError("this application keeps no revocations")
        # A token this server did not store expires no later than the longest lifetime.
        longest = dt.datetime.now(dt.UTC) + dt.timedelta(
            seconds=tokens.settings.jwt_max_ttl_seconds + 60
        )
        expires = (
            dt.datetime.fromtimestamp(user.token_expires, dt.UTC)
            if jti == user.token_id and user.token_expires is not None
            else longest
        )
        revocations.revoke(user.tenant_id, jti, expires_at=expires, revoked_by=user.id)
        return {"jti": jti, "revoked": True}

    api.add_api_route(
        "/api/auth/revoke",
        json_endpoint(app, call),
        methods=["POST"],
        name="auth-revoke",
        operation_id="auth-revoke",
        summary="Revoke a token by its jti (without a body: the caller's own token)",
        tags=["auth"],
        response_model=None,
        openapi_extra={
            "security": [{BEARER_SCHEME: []}],
            "requestBody": {
                "required": False,
                "content": {
                    "application/json": {
                        "schema": {
                            "type": "object",
                            "properties": {"jti": {"type": "string", "maxLength": MAX_JTI_LENGTH}},
                            "additionalProperties": False,
                        }
                    }
                },
            },
            "responses": {
                "200": {
                    "description": "The token is revoked",
                    "content": json_body(catalogue.ref(SuccessEnvelope)),
                },
                "default": {
                    "description": "An error",
                    "content": json_body(catalogue.ref(ErrorEnvelope)),
                },
            },
        },
    )


def _jti_of(body: Any, user: SessionUser) -> str:
    if body is None or body == {}:
        if user.token_id is None:
            raise _bad_jti("missing", 'this token has no jti: send {"jti": "..."}')
        return user.token_id
    jti = body.get("jti") if isinstance(body, dict) else None
    if (
        not isinstance(body, dict)
        or set(body) != {"jti"}
        or not isinstance(jti, str)
        or not 0 < len(jti) <= MAX_JTI_LENGTH
    ):
        raise _bad_jti("string_type", f"a string of 1 to {MAX_JTI_LENGTH} characters")
    return jti


def _bad_jti(kind: str, message: str) -> ValidationError:
    return ValidationError(
        handler="/api/auth/revoke", fields=[{"path": "jti", "type": kind, "message": message}]
    )
