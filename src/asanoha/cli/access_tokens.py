"""``asanoha tokens``: personal access tokens for scripts, CI jobs and agents: create one
(printed once), list them, revoke one. ``asanoha token`` still prints a short-lived signed
token for development."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from asanoha.cli.app_loading import AppOption, load_app
from asanoha.cli.tokens import split_roles

if TYPE_CHECKING:
    from asanoha.platform.identity.access_tokens import AccessTokenStore

tokens = typer.Typer(help="Personal access tokens: create (shown once), list, revoke.")

#: Who the command line records as the creator or revoker of a token.
CLI_ACTOR = "cli"


def _store(app: str) -> AccessTokenStore:
    loaded = load_app(app)
    store = loaded.tokens.access_tokens
    assert store is not None  # every App keeps its personal access tokens
    return store


@tokens.command()
def create(
    app: AppOption,
    user: Annotated[str, typer.Option(help="The user the token acts for.", show_default=False)],
    tenant: Annotated[str, typer.Option(help="The user's tenant.", show_default=False)],
    scopes: Annotated[
        str,
        typer.Option(
            help="QN patterns the token may call, comma-separated: 'crm:write:*,crm:query:*'.",
            show_default=False,
        ),
    ],
    expires: Annotated[str, typer.Option(help="Lifetime: 90d, 12h, 30m (at most 366d).")] = "90d",
    name: Annotated[str, typer.Option(help="What the token is for.")] = "token",
    roles: Annotated[
        list[str] | None,
        typer.Option(
            help="Roles of the token; repeat the option or separate with commas. Without "
            "roles the scopes are the token's grant: it reaches the handlers they match "
            "(never one only the system user may call)."
        ),
    ] = None,
    agent: Annotated[
        str | None,
        typer.Option(
            help="Make it an agent principal's token, acting for this agent run: it can "
            "never approve a high-risk call."
        ),
    ] = None,
) -> None:
    """Create a personal access token and print it once: only its SHA-256 is stored.

    The token carries the user, tenant, roles and scopes given here; a call outside its
    scopes answers 403 token_scope_denied. It may never hold the role 'system'.
    """
    from asanoha.platform.identity.access_tokens import AccessTokenError, parse_lifetime

    try:
        created = _store(app).create(
            tenant_id=tenant,
            user_id=user,
            name=name,
            scopes=scopes,
            lifetime=parse_lifetime(expires),
            created_by=CLI_ACTOR,
            roles=split_roles(roles) if roles else None,
            agent=agent,
        )
    except AccessTokenError as exc:
        raise typer.BadParameter(str(exc)) from None
    typer.echo(
        f"token {created.row['id']} ({created.row['name']}), expires "
        f"{created.row['expiresAt']}; shown once, keep it secret:",
        err=True,
    )
    typer.echo(created.token)


@tokens.command("list")
def list_tokens(
    app: AppOption,
    tenant: Annotated[str, typer.Option(help="The tenant.", show_default=False)],
    user: Annotated[str | None, typer.Option(help="Only this user's tokens.")] = None,
) -> None:
    """List the personal access tokens of a tenant (never the tokens themselves), as JSON."""
    typer.echo(json.dumps({"tokens": _store(app).list(tenant, user)}, indent=2))


@tokens.command()
def revoke(
    app: AppOption,
    tenant: Annotated[str, typer.Option(help="The token's tenant.", show_default=False)],
    token_id: Annotated[str, typer.Argument(help="The token's id (its jti).", show_default=False)],
) -> None:
    """Revoke a token by its id (jti): a personal access token, or any signed token of the
    tenant. Every API process refuses it within seconds (401 token_revoked)."""
    import datetime as dt

    loaded = load_app(app)
    verifier = loaded.tokens
    assert verifier.access_tokens is not None and verifier.revocations is not None
    found = verifier.access_tokens.revoke(tenant, token_id, revoked_by=CLI_ACTOR)
    if found is None:
        # A signed token lives no longer than ASANOHA_JWT_MAX_TTL_SECONDS.
        until = dt.datetime.now(dt.UTC) + dt.timedelta(
            seconds=loaded.settings.jwt_max_ttl_seconds + 60
        )
        verifier.revocations.revoke(tenant, token_id, expires_at=until, revoked_by=CLI_ACTOR)
    typer.echo(f"revoked {token_id}")
