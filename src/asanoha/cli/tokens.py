"""``asanoha token``: a signed bearer token for development and tests."""

from __future__ import annotations

from typing import Annotated

import typer

from asanoha.cli.app_loading import AppOption, load_app
from asanoha.cli.signing import refuse_insecure_signing

# The platform is imported inside the functions that use it: ``asanoha --help`` imports
# this module (see ``asanoha.cli``).


def split_roles(values: list[str]) -> list[str]:
    """Roles given as repeated options, comma-separated, or both."""
    return [role.strip() for value in values for role in value.split(",") if role.strip()]


def token(
    app: AppOption,
    sub: Annotated[str, typer.Option(help="The user id (claim 'sub').", show_default=False)],
    tenant: Annotated[
        str, typer.Option(help="The tenant id (claim 'tenant').", show_default=False)
    ],
    roles: Annotated[
        list[str] | None,
        typer.Option(help="Roles (claim 'roles'); repeat the option or separate with commas."),
    ] = None,
    expires_in: Annotated[
        int | None,
        typer.Option(
            help="Seconds until the token expires (claim 'exp'); default ASANOHA_JWT_TTL_SECONDS, "
            "at most ASANOHA_JWT_MAX_TTL_SECONDS."
        ),
    ] = None,
) -> None:
    """Print a bearer token signed with the application's ASANOHA_JWT_SECRET.

    The token carries sub, tenant, roles, iat and exp (exp is required by the API). For
    development and tests: production tokens come from your identity provider. Refuses the
    placeholder secret outside development, the role 'system' (the platform's own identity
    for jobs and consumers) and a lifetime above ASANOHA_JWT_MAX_TTL_SECONDS.
    """
    from asanoha.platform.http.auth import TokenRefusedError, issue_token
    from asanoha.platform.model import SessionUser

    loaded = load_app(app)
    refuse_insecure_signing(loaded)
    if loaded.settings.uses_placeholder_secret:
        typer.echo(
            "warning: signed with the placeholder secret (ASANOHA_DEVELOPMENT=true); set "
            "ASANOHA_JWT_SECRET to the secret the API uses",
            err=True,
        )
    user = SessionUser.of(sub, tenant, split_roles(roles or []))
    try:
        signed = issue_token(loaded.settings, user, ttl=expires_in)
    except TokenRefusedError as exc:
        raise typer.BadParameter(str(exc)) from None
    typer.echo(signed)
