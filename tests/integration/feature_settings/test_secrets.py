"""``feature.secret``: set write-only, stored sealed under the tenant's key, read by the
feature's handlers and jobs, and found nowhere else: not in any table, log record, span or
response of a full run."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from asanoha.platform import telemetry
from asanoha.testing import TestUsers
from tests.integration.feature_settings.features import SEEN
from tests.integration.personal.scan import hits, stored_text

SECRET = "pw-7f3a9c21e5b84d06"
SET = "secrets:write:set"


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.use_tracer_provider(provider)
    try:
        yield exporter
    finally:
        telemetry.disable()


def test_a_secret_is_used_by_its_feature_and_found_nowhere_in_plaintext(
    stack: Any, spans: InMemorySpanExporter, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    responses: list[str] = []

    def keep(response: Any) -> Any:
        responses.append(response.text)
        return response

    admin = TestUsers.admin
    payload = {"feature": "mailer", "name": "smtp_password", "value": SECRET}
    answered = keep(stack.http.write(SET, payload, admin)).json()["data"]
    assert answered == {"feature": "mailer", "name": "smtp_password", "is_set": True}

    sent = keep(stack.http.write("mailer:write:send", {"to": "a@x.test"}, admin)).json()
    assert (sent["data"]["has_password"], sent["data"]["password_length"]) == (True, len(SECRET))
    nested = keep(stack.http.write("shop:write:order", {"to": "b@x.test"}, admin)).json()
    assert nested["data"]["has_password"] is True
    listed = keep(stack.http.query("config:query:list", {}, admin)).json()["data"]
    assert {"feature": "mailer", "name": "smtp_password", "is_set": True} in listed["secrets"]
    # Another tenant has no value: its handlers see none.
    other = keep(stack.http.write("mailer:write:send", {"to": "c@x.test"}, TestUsers.other_tenant))
    assert other.json()["data"]["has_password"] is False
    stack.drain()
    # The three jobs run side by side: in any order.
    assert sorted((seen["tenant"], seen["password_ok"]) for seen in SEEN) == sorted(
        [
            (admin.tenant_id, True),
            (admin.tenant_id, True),
            (TestUsers.other_tenant.tenant_id, False),
        ]
    )

    # The row holds the value sealed under the tenant's key, nothing holds the plaintext.
    assert hits(stack, [SECRET]) == []
    [sealed] = [
        text for text in stored_text(stack)["asanoha_feature_settings"] if text.startswith("pii1.")
    ]
    assert SECRET not in sealed
    assert not [record for record in caplog.records if SECRET in _record_text(record)]
    assert any("[secret]" in record.getMessage() for record in caplog.records)
    for span in spans.get_finished_spans():
        texts = [str(value) for value in (span.attributes or {}).values()]
        texts += [json.dumps(dict(event.attributes or {})) for event in span.events]
        assert not [text for text in texts if SECRET in text], span.name
    assert not [text for text in responses if SECRET in text]


def test_a_handler_that_returns_a_secret_is_refused_and_writes_nothing(stack: Any) -> None:
    payload = {"feature": "mailer", "name": "smtp_password", "value": SECRET}
    stack.http.write_ok(SET, payload, TestUsers.admin)
    for qn in ("mailer:write:leak", "mailer:write:leak-in-error", "mailer:write:leak-into-event"):
        with stack.nothing_written():
            response = stack.http.write(qn, {}, TestUsers.admin)
        assert SECRET not in response.text
        error = response.json()["error"]
        assert (response.status_code, error["code"], error["reason"]) == (
            500,
            "internal_error",
            "secret_in_output",
        )
        assert error["details"]["handler"] in (qn, "mailer:event:sent.created")
    assert hits(stack, [SECRET]) == []


def test_only_an_admin_sets_a_secret_and_an_undeclared_one_is_404(stack: Any) -> None:
    payload = {"feature": "mailer", "name": "smtp_password", "value": SECRET}
    with stack.nothing_written():
        error = stack.http.write_err(SET, payload, TestUsers.user)
    assert (error.http_status, error.code, error.reason) == (403, "access_denied", "role_required")
    unknown = {"feature": "mailer", "name": "api_key", "value": SECRET}
    with stack.nothing_written():
        error = stack.http.write_err(SET, unknown, TestUsers.admin)
    assert (error.http_status, error.code, error.reason) == (404, "not_found", "secret_not_found")
    assert (error.details["feature"], error.details["name"]) == ("mailer", "api_key")
    assert "asanoha_feature_settings" not in {table for table, _ in hits(stack, ["pii1."])}


def _record_text(record: logging.LogRecord) -> str:
    return " ".join(
        str(part)
        for part in (record.getMessage(), record.exc_text, getattr(record, "data", None))
        if part
    )
