"""The embedded default: one ``asanoha serve`` runs the API, the jobs and the consumers.

With the in-process broker (``memory://``) nothing outside the process can reach the queues,
so the serving process runs the worker itself. With the placeholder JWT secret it signs with
a random secret of its own and prints a development token, as Jupyter prints its token URL;
so does ``serve`` in development (``ASANOHA_DEVELOPMENT=true``). Anywhere else the placeholder
is refused: a token printed to a production log would hold every role.
"""

from __future__ import annotations

import logging
import secrets
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from asanoha.cli.notices import notify

if TYPE_CHECKING:
    from asanoha.app import App

# The platform is imported inside the functions: ``asanoha --help`` imports every command
# module, and so this one (see ``asanoha.cli``).

DEVELOPER_ID = "developer"
#: The loggers a Celery worker prints: the jobs' own ``ctx.log`` lines and the platform's
#: job messages, and Celery's received / succeeded / retry / failed lines of each task.
JOB_ACTIVITY_LOGGERS = ("asanoha.job", "asanoha.jobs", "celery.worker.strategy", "celery.app.trace")
#: As ``celery worker`` prints its lines.
JOB_ACTIVITY_FORMAT = "[%(asctime)s: %(levelname)s/%(name)s] %(message)s"


def uses_embedded_broker(app: App) -> bool:
    """Whether jobs go through the in-process broker, which only this process reaches."""
    from asanoha.platform.settings import EMBEDDED_BROKER_URL

    return app.settings.broker_url.startswith(EMBEDDED_BROKER_URL)


@contextmanager
def embedded_worker(app: App, log_level: str = "info") -> Iterator[None]:
    """Run the application's jobs and consumers in this process while the block runs
    (embedded broker only), printing what they do at ``log_level`` and above."""
    if not uses_embedded_broker(app) or not (app.registry.jobs or app.consumers):
        yield
        return
    from asanoha.platform.jobs.publishing import requeue_unclaimed
    from asanoha.workers.runtime import JobRuntime

    show_job_activity(log_level)
    # Messages an earlier process left in its in-process broker went with it: send their
    # jobs again now, not after the visibility timeout.
    with app.database.begin() as conn:
        requeued = requeue_unclaimed(conn, app.service.tables)
    # With the relay: nothing else publishes jobs whose first publish failed.
    runtime = JobRuntime.start(app, relay=True)
    if requeued:
        notify(f"{requeued} job(s) an earlier process published but never ran: sent again.")
    notify(
        "Jobs and consumers run in this process (in-process broker memory://). For separate "
        "workers set ASANOHA_BROKER_URL to redis://... or amqp://... and run asanoha worker."
    )
    try:
        yield
    finally:
        runtime.stop()


def show_job_activity(log_level: str) -> None:
    """Print the jobs' log lines and outcomes on stderr, as a Celery worker does (the
    in-process worker of ``serve`` configures no logging of its own)."""
    from asanoha.platform.log_format import configured_log_format

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(JOB_ACTIVITY_FORMAT))
    level = logging.getLevelName(log_level.upper())
    json_lines = configured_log_format() == "json"
    for name in JOB_ACTIVITY_LOGGERS:
        logger = logging.getLogger(name)
        if json_lines:
            # The root logger's JSON handler writes them: only their level is set here.
            logger.setLevel(level if isinstance(level, int) else logging.INFO)
            continue
        # Celery puts a NullHandler on its own loggers; a handler of the user's stays.
        if all(isinstance(known, logging.NullHandler) for known in logger.handlers):
            logger.addHandler(handler)
            logger.setLevel(level if isinstance(level, int) else logging.INFO)
            logger.propagate = False


def use_process_secret(app: App) -> bool:
    """On the placeholder secret, in development or on the embedded default: sign with a
    random secret of this process only. Whether it did (then print a development token).

    Call it before the HTTP app is built: the app reads the secret from these settings. The
    approval key never came from the placeholder here (``Settings.approval_signing_secret``).
    """
    settings = app.settings
    if not settings.uses_placeholder_secret:
        return False
    if not (settings.development or settings.uses_embedded_default):
        return False
    settings.jwt_secret = secrets.token_urlsafe(32)
    return True


def development_token(app: App) -> str:
    """A token holding every role the application's handlers name, but ``system``: that is
    the platform's own identity for jobs and consumers, which no token may carry."""
    from asanoha.platform.http.auth import issue_token
    from asanoha.platform.model import SYSTEM_ROLE, SessionUser

    roles = sorted(
        {role for handler in app.registry.handlers for role in handler.access.roles} - {SYSTEM_ROLE}
    )
    user = SessionUser.of(DEVELOPER_ID, app.settings.default_tenant, roles)
    return issue_token(app.settings, user, ttl=app.settings.jwt_ttl_seconds)


def announce_development_token(app: App) -> None:
    """Print a development token (after ``use_process_secret``)."""
    notify(
        "ASANOHA_JWT_SECRET is not set: this process signs with a random secret. "
        "Development token (roles: every role the handlers name but system):"
    )
    notify(f"    Authorization: Bearer {development_token(app)}")
