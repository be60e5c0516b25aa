"""``/health`` and ``/health/ready``."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

from asanoha import App, Feature
from asanoha.platform.settings import Settings
from asanoha.testing import HttpError, Stack
from asanoha.testing.http_client import TestClient
from tests.integration.http.features import catalog


def test_health_answers(stack: Stack) -> None:
    response = stack.http.client.get("/health")
    assert response.status_code == 200
    assert response.json() == {"isSuccess": True, "data": {"status": "ok"}}


def test_ready_when_the_database_answers(stack: Stack) -> None:
    response = stack.http.client.get("/health/ready")
    assert response.status_code == 200
    assert response.json()["data"] == {"status": "ready", "checks": {"database": "ok"}}


def ready_response(app: App) -> Any:
    """``GET /health/ready`` of ``app``, which is closed afterwards."""
    try:
        return TestClient(app.http).get("/health/ready")
    finally:
        app.close()


def test_not_ready_when_the_database_is_unreachable() -> None:
    # Port 1 on the loopback refuses connections at once.
    settings = Settings(
        database_url="postgresql+psycopg://postgres@127.0.0.1:1/none",
        jwt_secret=secrets.token_urlsafe(32),
    )
    app = App([catalog], settings)
    response = ready_response(app)
    assert response.status_code == 503
    error = HttpError.from_response(response)
    assert (error.code, error.reason) == ("unavailable", "dependency_unavailable")
    assert error.details["checks"]["database"].startswith("error:")


def jobs_app(broker_url: str, tmp_path: Path) -> App:
    feature = Feature("pinger")

    @feature.job("ping", manual=True)
    def ping(payload: dict[str, Any], ctx: Any) -> None: ...

    settings = Settings(
        database_url=f"sqlite+pysqlite:///{tmp_path / 'ready.sqlite3'}",
        broker_url=broker_url,
        queue_prefix=f"ready-{tmp_path.name}",
        jwt_secret=secrets.token_urlsafe(32),
    )
    app = App([feature], settings)
    app.create_schema()
    return app


def test_ready_checks_the_broker_when_there_are_jobs(tmp_path: Path) -> None:
    app = jobs_app("redis://127.0.0.1:6379/0", tmp_path)
    response = ready_response(app)
    assert response.status_code == 200
    assert response.json()["data"]["checks"] == {"database": "ok", "broker": "ok", "jobs": "ok"}


def test_not_ready_when_the_broker_is_unreachable(tmp_path: Path) -> None:
    app = jobs_app("redis://127.0.0.1:1/0", tmp_path)
    response = ready_response(app)
    assert response.status_code == 503
    error = HttpError.from_response(response)
    assert error.details["checks"]["database"] == "ok"
    assert error.details["checks"]["broker"].startswith("error:")
