"""``asanoha_drain`` for tests that run the application's Celery with Celery's own pytest
fixtures (``celery.contrib.pytest``: ``celery_app``, ``celery_worker``, ``celery_config``).

The test defines an ``asanoha_app`` fixture (its ``App``) and points ``celery_app`` at
``asanoha_app.celery``; ``asanoha_drain()`` then waits for jobs, retries and consumers exactly
as ``stack.drain()`` does, whichever process runs the workers (it reads the broker and the
database, not the worker).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from asanoha.app import App
    from asanoha.workers.drain import DrainSummary


def celery_worker_parameters_for(app: App) -> dict[str, Any]:
    """What ``celery_worker_parameters`` returns for ``app``: every queue of the application, and no ping
    check (it needs a result backend, and asanoha jobs keep no results)."""
    from asanoha.workers.lanes import app_queues

    return {"queues": list(app_queues(app.settings)), "perform_ping_check": False}


@pytest.fixture
def asanoha_drain(asanoha_app: App, celery_worker: Any) -> Callable[..., DrainSummary]:
    """``asanoha_drain(timeout=10)``: wait until the jobs and consumers of ``asanoha_app`` have
    settled; raises like ``stack.drain()`` for failed jobs, dead consumers or a timeout."""
    from asanoha.workers.drain import Drainer

    return Drainer(asanoha_app).drain
