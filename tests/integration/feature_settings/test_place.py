"""``ctx.locale`` and ``ctx.tz``: the request's ``Accept-Language`` and the token's
``locale``/``zoneinfo`` claims, else the tenant's configured ``locale``/``tz``, else ``en``
and UTC; a job reads what the write that enqueued it asked for. A job of a feature switched
off in its tenant waits without spending its attempt."""

from __future__ import annotations

from typing import Any

import jwt
from sqlalchemy import select

from asanoha import Snooze
from asanoha.platform.http.auth import issue_token
from asanoha.testing import TestUsers
from asanoha.workers.attempt_span import call_in_attempt_span
from asanoha.workers.job_context import JobContext, JobMeta
from tests.integration.feature_settings.features import SEEN

SETTINGS = "mailer:query:settings"


def claims_header(stack: Any, **claims: str) -> dict[str, str]:
    """A bearer token for the admin with extra claims (as an identity provider issues)."""
    settings = stack.http.settings
    token = issue_token(settings, TestUsers.admin)
    decoded = jwt.decode(token, options={"verify_signature": False})
    signed = jwt.encode(
        {**decoded, **claims}, settings.jwt_signing_secret, algorithm=settings.jwt_algorithm
    )
    return {"Authorization": f"Bearer {signed}"}


def place(stack: Any, headers: dict[str, str] | None = None) -> tuple[str, str]:
    if headers and "Authorization" in headers:
        response = stack.http.client.post(f"/api/query/{SETTINGS}", json={}, headers=headers)
        data = response.json()["data"]
    else:
        data = stack.http.query_ok(SETTINGS, {}, TestUsers.admin, headers)
    return data["locale"], data["tz"]


def set_tenant(stack: Any, key: str, value: str) -> Any:
    return stack.http.write_ok("config:write:set", {"key": key, "value": value}, TestUsers.admin)


def test_locale_and_zone_fall_back_from_request_to_token_to_tenant_to_default(stack: Any) -> None:
    assert place(stack) == ("en", "UTC")
    set_tenant(stack, "locale", "fr")
    set_tenant(stack, "tz", "Europe/Berlin")
    assert place(stack) == ("fr", "Europe/Berlin")
    assert place(stack, {"Accept-Language": "de-AT,de;q=0.9,en;q=0.5"}) == (
        "de-AT",
        "Europe/Berlin",
    )
    token = claims_header(stack, locale="it", zoneinfo="America/New_York")
    assert place(stack, token) == ("it", "America/New_York")
    assert place(stack, {**token, "Accept-Language": "en;q=0.2, de"}) == (
        "de",
        "America/New_York",
    )
    # Another tenant keeps the defaults.
    other = stack.http.query_ok(SETTINGS, {}, TestUsers.other_tenant)
    assert (other["locale"], other["tz"]) == ("en", "UTC")


def test_an_unknown_zone_is_refused_and_nothing_is_stored(stack: Any) -> None:
    with stack.nothing_written():
        error = stack.http.write_err(
            "config:write:set", {"key": "tz", "value": "Mars/Olympus"}, TestUsers.admin
        )
    assert (error.http_status, error.code, error.reason) == (
        422,
        "unprocessable",
        "config_value_invalid",
    )
    assert error.details["key"] == "tz"
    assert place(stack) == ("en", "UTC")


def test_a_job_reads_the_place_of_its_write_and_waits_while_its_feature_is_off(
    asanoha_stack: Any,
) -> None:
    from asanoha.handlers import feature_config
    from tests.integration.feature_settings.features import mailer, shop

    SEEN.clear()
    stack = asanoha_stack(features=[mailer, shop, *feature_config.features], database="sqlite")
    token = claims_header(stack, zoneinfo="Asia/Tokyo")
    response = stack.http.client.post(
        "/api/write/mailer:write:send",
        json={"to": "a@x.test"},
        headers={**token, "Accept-Language": "de"},
    )
    assert response.status_code == 200, response.text
    outbox = stack.tables.outbox
    with stack.db.connect() as conn:
        row = conn.execute(select(outbox).where(outbox.c.job_qn == "mailer:job:record")).one()
    job = stack.registry.job("mailer:job:record")
    assert job is not None

    def attempt() -> Any:
        meta = JobMeta.from_headers(row.headers)
        ctx = JobContext(stack.service, job, meta, task_id=str(row.id), retries=0)
        return call_in_attempt_span(job, row.payload, ctx)

    with stack.db.begin() as conn:
        stack.service.feature_settings.set_enabled(conn, "tenant-a", "mailer", False, "test")
    held = attempt()
    assert isinstance(held, Snooze) and held.seconds > 0
    assert SEEN == []

    with stack.db.begin() as conn:
        stack.service.feature_settings.set_enabled(conn, "tenant-a", "mailer", True, "test")
    assert attempt() is None
    assert [(seen["locale"], seen["tz"]) for seen in SEEN] == [("de", "Asia/Tokyo")]
    # What the job calls keeps the place too.
    ctx = JobContext(stack.service, job, JobMeta.from_headers(row.headers), task_id="t", retries=0)
    seen = ctx.query_as(TestUsers.admin, SETTINGS, {})
    assert (seen["locale"], seen["tz"]) == ("de", "Asia/Tokyo")
