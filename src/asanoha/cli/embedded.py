"""The embedded default: one ``asanoha serve`` runs the API, the jobs and the consumers.

With the in-process broker (``memory://``) nothing outside the process can reach the queues,
so the serving process runs the worker itself. With the placeholder JWT secret it signs with
a random secret of its own and prints a development token, as Jupyter prints its token URL.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager

import typer

from asanoha.app import App
from asanoha.platform.model import SessionUser
from asanoha.platform.settings import EMBEDDED_BROKER_URL, PLACEHOLDER_JWT_SECRET

DEVELOPER_ID = "developer"


def uses_embedded_broker(app: App) -> bool:
    """Whether jobs go through the in-process broker, which only this process reaches."""
    return app.settings.broker_url.startswith(EMBEDDED_BROKER_URL)


@contextmanager
def embedded_worker(app: App) -> Iterator[None]:
    """Run the application's jobs and consumers in this process while the block runs
    (embedded broker only)."""
    if not uses_embedded_broker(app) or not (app.registry.jobs or app.consumers):
        yield
        return
    from asanoha.workers.runtime import JobRuntime

    # With the relay: nothing else publishes jobs whose first publish failed.
    runtime = JobRuntime.start(app, relay=True)
    typer.echo(
        "Jobs and consumers run in this process (in-process broker memory://). For separate "
        "workers set ASANOHA_BROKER_URL to redis://... or amqp://... and run asanoha worker.",
        err=True,
    )
    try:
        yield
    finally:
        runtime.stop()


def mint_development_token(app: App) -> str | None:
    """On the placeholder secret: sign with a random secret for this process only, and return
    a token holding every role the application's handlers name; ``None`` otherwise."""
    if app.settings.jwt_secret != PLACEHOLDER_JWT_SECRET:
        return None
    from asanoha.platform.http.auth import issue_token

    # Before the HTTP app is built: it reads the secret from these settings.
    app.settings.jwt_secret = secrets.token_urlsafe(32)
    roles = sorted({role for handler in app.registry.handlers for role in handler.access.roles})
    user = SessionUser.of(DEVELOPER_ID, app.settings.default_tenant, roles)
    return issue_token(app.settings, user, ttl=app.settings.jwt_ttl_seconds)


def announce_development_token(app: App) -> None:
    """Print the development token when ``mint_development_token`` made one."""
    token = mint_development_token(app)
    if token is None:
        return
    typer.echo(
        "ASANOHA_JWT_SECRET is not set: this process signs with a random secret. "
        "Development token (roles: every role the handlers name):",
        err=True,
    )
    typer.echo(f"    Authorization: Bearer {token}", err=True)
