"""``/health``, ``/health/ready`` (this process can serve) and ``/health/jobs`` (the job
pipeline), as a load balancer, a probe and an alerting system call them: unauthenticated."""

from __future__ import annotations

import datetime as dt
import logging
import secrets
from typing import Any

import pytest
from sqlalchemy import update

from asanoha import Access, App, Entity, Feature, fields
from asanoha.platform.settings import Settings
from asanoha.testing import HttpError, Stack, TestUsers
from asanoha.testing.http_client import TestClient
from asanoha.testing.plugin import StackFactory
from tests.integration.http.features import catalog
from tests.private_redis import PrivateRedis

#: What an exception's text or a connection's address would show; none may reach a caller.
LEAKS = ("Error", "error:", "127.0.0.1", "port", "connect", "Traceback", "psycopg", "redis://")


def test_health_answers(stack: Stack) -> None:
    response = stack.http.client.get("/health")
    assert response.status_code == 200
    assert response.json() == {"isSuccess": True, "data": {"status": "ok"}}


def test_ready_when_the_database_answers(stack: Stack) -> None:
    response = stack.http.client.get("/health/ready")
    assert response.status_code == 200
    assert response.json()["data"] == {"status": "ready", "checks": {"database": "ok"}}


def assert_no_leak(text: str) -> None:
    for leak in LEAKS:
        assert leak not in text, (leak, text)


def test_not_ready_when_the_database_is_unreachable_with_a_short_cause(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Port 1 on the loopback refuses connections at once.
    settings = Settings(
        database_url="postgresql+psycopg://postgres@127.0.0.1:1/none",
        jwt_secret=secrets.token_urlsafe(32),
    )
    app = App([catalog], settings)
    try:
        with caplog.at_level(logging.WARNING, logger="asanoha.http.health"):
            response = TestClient(app.http).get("/health/ready")
    finally:
        app.close()
    assert response.status_code == 503
    error = HttpError.from_response(response)
    assert (error.code, error.reason) == ("unavailable", "dependency_unavailable")
    assert error.details == {"checks": {"database": "unreachable"}}
    assert_no_leak(response.text)
    # The operator finds the cause in the log.
    logged = [record.getMessage() for record in caplog.records]
    assert any("'database'" in line and "OperationalError" in line for line in logged), logged


ADMIN = Access(roles=["Admin"])
NOTE_CREATE = "pinger:write:note:create"


def pinger() -> Feature:
    """A write that triggers a job, so the application has a job pipeline."""
    feature = Feature("pinger")
    note = Entity(
        table="pinger_notes",
        fields={"text": fields.text(required=True, personal=False, reason="fixture")},
    )
    feature.crud("note", note, write=ADMIN, read=ADMIN)

    @feature.job("ping", on=NOTE_CREATE)
    def ping(payload: dict[str, Any], ctx: Any) -> None: ...

    return feature


def test_job_health_answers_ok_when_the_broker_answers(asanoha_stack: StackFactory) -> None:
    stack = asanoha_stack(features=[pinger()])
    response = stack.http.client.get("/health/jobs")
    assert response.status_code == 200
    assert response.json()["data"] == {
        "status": "ok",
        "checks": {"broker": "ok", "jobs": "ok", "unclaimed": "ok"},
    }


def test_job_health_of_an_application_without_jobs_has_no_checks(stack: Stack) -> None:
    response = stack.http.client.get("/health/jobs")
    assert response.status_code == 200
    assert response.json()["data"] == {"status": "ok", "checks": {}}


def test_the_api_stays_ready_and_takes_writes_while_the_broker_is_gone(
    asanoha_stack: StackFactory, private_redis: PrivateRedis, caplog: pytest.LogCaptureFixture
) -> None:
    stack = asanoha_stack(features=[pinger()], settings={"broker_url": private_redis.url})
    client = stack.http.client
    assert client.get("/health/ready").status_code == 200
    assert client.get("/health/jobs").status_code == 200
    private_redis.stop()

    ready = client.get("/health/ready")
    assert ready.status_code == 200
    assert ready.json()["data"] == {"status": "ready", "checks": {"database": "ok"}}
    # The write commits its job row; the relay publishes it once the broker is back.
    created = stack.http.write_ok(NOTE_CREATE, {"text": "hello"}, TestUsers.admin)
    assert created["text"] == "hello"
    with stack.db.connect() as conn:
        assert conn.execute(stack.tables.outbox.select()).all() != []

    with caplog.at_level(logging.WARNING, logger="asanoha.http.health"):
        jobs = client.get("/health/jobs")
    assert jobs.status_code == 503
    error = HttpError.from_response(jobs)
    assert (error.code, error.reason) == ("unavailable", "dependency_unavailable")
    assert error.details == {"checks": {"broker": "unreachable", "jobs": "ok", "unclaimed": "ok"}}
    assert_no_leak(jobs.text)
    logged = [record.getMessage() for record in caplog.records]
    assert any("'broker'" in line and str(private_redis.port) in line for line in logged), logged


def test_a_due_job_nobody_published_fails_job_health_not_readiness(
    asanoha_stack: StackFactory,
) -> None:
    stack = asanoha_stack(features=[pinger()])
    stack.http.write_ok(NOTE_CREATE, {"text": "hello"}, TestUsers.admin)
    ten_minutes_ago = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=10)
    with stack.db.begin() as conn:
        conn.execute(
            update(stack.tables.outbox).values(
                not_before=ten_minutes_ago, relay_after=ten_minutes_ago
            )
        )
    assert stack.http.client.get("/health/ready").status_code == 200
    jobs = stack.http.client.get("/health/jobs")
    assert jobs.status_code == 503
    checks = HttpError.from_response(jobs).details["checks"]
    assert checks["broker"] == "ok"
    assert checks["jobs"].startswith("the oldest due job has waited 600 s to be published")


def test_metrics_show_the_job_health_checks(asanoha_stack: StackFactory) -> None:
    stack = asanoha_stack(features=[pinger()])
    text = stack.http.client.get("/metrics").text
    assert 'asanoha_job_health_ok{check="broker"} 1.0' in text
    assert 'asanoha_job_health_ok{check="jobs"} 1.0' in text
