"""``/health`` and ``/health/ready``."""

from __future__ import annotations

from asanoha import App
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


def test_not_ready_when_the_database_is_unreachable() -> None:
    # Port 1 on the loopback refuses connections at once.
    settings = Settings(database_url="postgresql+psycopg://postgres@127.0.0.1:1/none")
    app = App([catalog], settings)
    try:
        response = TestClient(app.http).get("/health/ready")
    finally:
        app.close()
    assert response.status_code == 503
    error = HttpError.from_response(response)
    assert (error.code, error.reason) == ("unavailable", "dependency_unavailable")
    assert error.details["checks"]["database"].startswith("error:")
