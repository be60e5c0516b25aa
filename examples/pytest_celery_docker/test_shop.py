"""A write triggers a job; the worker in its container runs it, asanoha_drain waits for it."""

from __future__ import annotations

from typing import Any

from pytest_celery import CeleryTestSetup

from asanoha import App, SessionUser

ADMIN = SessionUser.of("u-1", "acme", ["Admin"])


def test_the_confirmation_is_retried_once_then_succeeds_on_a_worker_in_a_container(
    celery_setup: CeleryTestSetup, asanoha_app: App, asanoha_drain: Any
) -> None:
    asanoha_app.service.dispatch_write("shop:write:order:create", {"item": "lamp"}, ADMIN)
    summary = asanoha_drain(timeout=60)
    assert (summary.succeeded, summary.retried, summary.failed) == (1, 1, 0)
