"""A write triggers a job; the in-process Celery worker runs it, asanoha_drain waits for it."""

from __future__ import annotations

from typing import Any

from asanoha import App, SessionUser

ADMIN = SessionUser.of("u-1", "acme", ["Admin"])


def test_the_confirmation_is_retried_once_then_succeeds(
    asanoha_app: App, celery_worker: Any, asanoha_drain: Any
) -> None:
    asanoha_app.service.dispatch_write("shop:write:order:create", {"item": "lamp"}, ADMIN)
    summary = asanoha_drain()
    assert (summary.succeeded, summary.retried, summary.failed) == (1, 1, 0)
