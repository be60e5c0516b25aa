"""Personal access tokens as handlers: ``tokens:write:create``, ``tokens:write:revoke`` and
``tokens:query:list``. Add ``token_admin.feature`` to an application's features to expose
them (over HTTP, to agents and in the console).

A caller manages its own tokens; an ``Admin`` those of its tenant. A token gets no role its
creator lacks and, made by a scoped token, no scope its creator lacks; a token made by an
agent principal is an agent's token (it can never approve). The secret is answered once.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from asanoha.platform.errors import AccessDeniedError, NotFoundError, Reasons, ValidationError
from asanoha.platform.identity.access_tokens import (
    AccessTokenError,
    AccessTokenStore,
    parse_lifetime,
)
from asanoha.platform.identity.revocations import RevocationList
from asanoha.platform.model import Access, Agent, Feature, SessionUser
from asanoha.platform.service import QueryContext, WriteContext
from asanoha.platform.service.handler_context import platform_request
from asanoha.platform.store import platform_tables

#: The role that manages every token of its tenant.
TENANT_ADMIN_ROLE = "Admin"
OWN_TOKENS = Access(open_to_all="a caller manages its own tokens; an Admin its tenant's")

feature = Feature("tokens")


class CreateToken(BaseModel):
    """A personal access token for the caller (an Admin: for ``user`` of its tenant)."""

    name: str = Field(min_length=1, max_length=200)
    scopes: list[str] = Field(min_length=1, max_length=100)
    expires: str = Field(default="90d", max_length=16)
    user: str | None = Field(default=None, max_length=64)
    #: Default: the caller's roles.
    roles: list[str] | None = Field(default=None, max_length=100)


class TokenId(BaseModel):
    """Which token: its id (its ``jti``)."""

    id: str = Field(min_length=1, max_length=64)


class TokenFilter(BaseModel):
    """An Admin may list another user's tokens, or (``user`` unset) the tenant's."""

    user: str | None = Field(default=None, max_length=64)


def _store() -> AccessTokenStore:
    tables = platform_tables()
    # Through the handler's connection only: in its transaction, seen by every process.
    return AccessTokenStore(
        None, tables.access_tokens, RevocationList(None, tables.token_revocations)
    )


def _is_admin(user: SessionUser) -> bool:
    return TENANT_ADMIN_ROLE in user.roles


def _refuse(field: str, message: str) -> ValidationError:
    return ValidationError(
        handler="tokens:write:create",
        fields=[{"path": field, "type": "value_error", "message": message}],
    )


@feature.write_handler(
    "create",
    access=OWN_TOKENS,
    agent=Agent(risk="high"),
    # The answer holds the new token: kept for replays, it would sit in plain text.
    answer_once="the token is shown once and stored only as its digest",
    description="Create a personal access token with QN-pattern scopes; the token is answered once.",
)
def create(payload: CreateToken, ctx: WriteContext) -> dict[str, Any]:
    """A token for the caller, or (an Admin) for a user of its tenant."""
    caller = ctx.user
    owner = payload.user or caller.id
    if owner != caller.id and not _is_admin(caller):
        raise AccessDeniedError(
            Reasons.ROLE_REQUIRED, handler=ctx.handler.qn, roles=[TENANT_ADMIN_ROLE]
        )
    roles = sorted(caller.roles) if payload.roles is None else payload.roles
    beyond = sorted(set(roles) - caller.roles)
    if beyond:
        raise _refuse("roles", f"a token gets no role its creator lacks: {', '.join(beyond)}")
    if caller.scopes is not None:
        wider = sorted(set(payload.scopes) - caller.scopes)
        if wider:
            raise _refuse("scopes", f"a scoped token creates no wider token: {', '.join(wider)}")
    try:
        created = _store().create(
            tenant_id=caller.tenant_id,
            user_id=owner,
            name=payload.name,
            scopes=payload.scopes,
            lifetime=parse_lifetime(payload.expires),
            created_by=caller.id,
            roles=roles,
            # An agent's token stays an agent's: it can never approve a high-risk call.
            agent=caller.agent,
            conn=platform_request(ctx).conn,
        )
    except AccessTokenError as exc:
        raise _refuse("scopes" if "scope" in str(exc) else "expires", str(exc)) from None
    return {**created.row, "token": created.token}


@feature.write_handler(
    "revoke",
    access=OWN_TOKENS,
    agent=Agent(risk="mid"),
    description="Revoke a personal access token by its id; it answers 401 token_revoked at once.",
)
def revoke(payload: TokenId, ctx: WriteContext) -> dict[str, Any]:
    """Revoke one of the caller's tokens (an Admin: any of its tenant's)."""
    caller = ctx.user
    found = _store().revoke(
        caller.tenant_id,
        payload.id,
        revoked_by=caller.id,
        user_id=None if _is_admin(caller) else caller.id,
        conn=platform_request(ctx).conn,
    )
    if found is None:
        raise NotFoundError(Reasons.TOKEN_NOT_FOUND, handler=ctx.handler.qn, id=payload.id)
    return found


@feature.query_handler(
    "list",
    access=OWN_TOKENS,
    description="The caller's personal access tokens (an Admin: its tenant's), never the secrets.",
)
def list_tokens(payload: TokenFilter, ctx: QueryContext) -> list[dict[str, Any]]:
    """The caller's tokens; an Admin's view is its tenant's (or one user's)."""
    caller = ctx.user
    if _is_admin(caller):
        user = payload.user
    elif payload.user not in (None, caller.id):
        raise AccessDeniedError(
            Reasons.ROLE_REQUIRED, handler=ctx.handler.qn, roles=[TENANT_ADMIN_ROLE]
        )
    else:
        user = caller.id
    return _store().list(caller.tenant_id, user, conn=platform_request(ctx).conn)
