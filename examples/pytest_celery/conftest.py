"""Celery's own pytest fixtures run the application's Celery in this process; asanoha_drain
waits for its work. Needs Redis on 127.0.0.1:6379 (or set CELERY_BROKER_URL)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from celery import Celery

# Celery's own fixtures, with an in-process worker: celery_worker and the two it reads.
# Imported here rather than listed in pytest_plugins, which pytest-celery (installed with the
# test extra) has already imported, so pytest would warn that it cannot rewrite them.
# Fixtures of this file win over a plugin's, so pytest-celery's Docker worker stays out.
from celery.contrib.pytest import (  # noqa: F401
    celery_includes,
    celery_worker,
    celery_worker_pool,
)
from shop import feature

from asanoha import App
from asanoha.platform.settings import Settings
from asanoha.testing.celery_drain import celery_worker_parameters_for
from asanoha.workers.lanes import app_queues, delete_queues


@pytest.fixture(scope="session")
def celery_config() -> dict[str, Any]:
    """The Celery settings of the test; the application's Celery takes them over."""
    return {"broker_url": os.environ.get("CELERY_BROKER_URL", "redis://127.0.0.1:6379/0")}


@pytest.fixture
def asanoha_app(celery_config: dict[str, Any], tmp_path: Path) -> Iterator[App]:
    """The application, on its own SQLite file and its own queue names."""
    settings = Settings(
        database_url=f"sqlite+pysqlite:///{tmp_path / 'shop.sqlite3'}",
        broker_url=celery_config["broker_url"],
        queue_prefix=f"example-{uuid.uuid4().hex[:8]}",
    )
    app = App([feature], settings)
    app.create_schema()
    yield app
    delete_queues(app.celery, app_queues(settings))
    app.close()


@pytest.fixture
def celery_app(asanoha_app: App, celery_config: dict[str, Any]) -> Celery:
    """Celery's fixtures run the application's Celery, configured through celery_config."""
    asanoha_app.celery.conf.update(celery_config)
    return asanoha_app.celery


@pytest.fixture
def celery_worker_parameters(asanoha_app: App) -> dict[str, Any]:
    """The worker consumes every lane queue of the application."""
    return celery_worker_parameters_for(asanoha_app)
