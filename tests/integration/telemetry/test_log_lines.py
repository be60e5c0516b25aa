"""JSON log lines: the fields the service layer binds around a dispatch, the trace ids of the
current span, and how the format and tracing are chosen from the environment."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from pydantic import BaseModel

from asanoha import Access, Feature, SessionUser
from asanoha.platform import telemetry
from asanoha.platform.log_context import bound_log_fields, log_fields
from asanoha.platform.log_format import AsanohaJsonFormatter, resolve_log_format

EDITOR = SessionUser.of("u-7", "tenant-b", ["Editor"])
SECRET = "payload-value-0f3a"


class Note(BaseModel):
    text: str


@pytest.fixture
def json_lines() -> Iterator[io.StringIO]:
    """Lines the ``asanoha.test`` logger writes, formatted as serve and worker format them."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(AsanohaJsonFormatter())
    logger = logging.getLogger("asanoha.test")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield out
    finally:
        logger.removeHandler(handler)


def parsed(out: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_a_line_logged_in_a_handler_names_its_tenant_handler_and_request(asanoha_stack, json_lines):
    feature = Feature("notes")

    @feature.write_handler("log", access=Access(roles=["Editor"]))
    def log_it(payload: Note, ctx: Any) -> None:
        logging.getLogger("asanoha.test").info("writing a note")

    stack = asanoha_stack([feature])
    stack.http.write_ok("notes:write:log", {"text": SECRET}, EDITOR)
    (line,) = parsed(json_lines)
    assert line["message"] == "writing a note"
    assert line["level"] == "INFO" and line["logger"] == "asanoha.test"
    assert line["tenant"] == "tenant-b"
    assert line["handler"] == "notes:write:log"
    assert isinstance(line["request_id"], str) and line["request_id"]
    assert "trace_id" not in line
    assert SECRET not in json_lines.getvalue()
    # The fields end with the dispatch.
    assert dict(log_fields()) == {}


def test_each_item_of_a_batch_logs_with_the_fields_of_a_single_write(asanoha_stack, json_lines):
    feature = Feature("notes")

    @feature.write_handler("log", access=Access(roles=["Editor"]))
    def log_it(payload: Note, ctx: Any) -> None:
        logging.getLogger("asanoha.test").info("writing a note")

    @feature.write_handler("other", access=Access(roles=["Editor"]))
    def log_other(payload: Note, ctx: Any) -> None:
        logging.getLogger("asanoha.test").info("writing another")

    stack = asanoha_stack([feature])
    items = [("notes:write:log", {"text": SECRET}), ("notes:write:other", {"text": "b"})]
    headers = {"X-Request-ID": "batch-request-1"}
    stack.http.batch_ok(items, EDITOR, headers=headers)
    stack.http.write_ok("notes:write:log", {"text": "c"}, EDITOR, headers=headers)
    first, second, single = parsed(json_lines)
    assert (first["handler"], second["handler"]) == ("notes:write:log", "notes:write:other")
    for line in (first, second):
        # What a single write's line carries, each item's handler its own.
        assert {key: line[key] for key in ("tenant", "request_id")} == {
            key: single[key] for key in ("tenant", "request_id")
        }
        assert set(single) - {"message"} <= set(line)
    assert single["tenant"] == "tenant-b" and single["request_id"] == "batch-request-1"
    assert SECRET not in json_lines.getvalue()
    assert dict(log_fields()) == {}


def test_a_line_inside_a_span_carries_its_trace_and_span_ids(json_lines):
    telemetry.use_tracer_provider(TracerProvider())
    try:
        with (
            telemetry.dispatch_span("write", "notes:write:log", "tenant-b"),
            bound_log_fields(job="notes:job:x", attempt=2, job_id=None),
        ):
            logging.getLogger("asanoha.test").info("inside")
    finally:
        telemetry.disable()
    (line,) = parsed(json_lines)
    assert len(line["trace_id"]) == 32 and len(line["span_id"]) == 16
    assert line["job"] == "notes:job:x" and line["attempt"] == 2
    assert "job_id" not in line


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_log_format_is_text_on_a_terminal_and_json_otherwise(monkeypatch):
    monkeypatch.delenv("ASANOHA_LOG_FORMAT", raising=False)
    assert resolve_log_format(None, Terminal()) == "text"
    assert resolve_log_format(None, io.StringIO()) == "json"
    assert resolve_log_format("auto", Terminal()) == "text"
    assert resolve_log_format("json", Terminal()) == "json"
    assert resolve_log_format("TEXT", io.StringIO()) == "text"
    monkeypatch.setenv("ASANOHA_LOG_FORMAT", "json")
    assert resolve_log_format(None, Terminal()) == "json"
    with pytest.raises(ValueError, match="use text, json or auto"):
        resolve_log_format("yaml")


@pytest.mark.parametrize(
    ("environ", "configured"),
    [
        ({}, False),
        ({"OTEL_SERVICE_NAME": "shop"}, False),
        ({"OTEL_TRACES_EXPORTER": "none"}, False),
        ({"OTEL_TRACES_EXPORTER": "console"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, True),
        ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"}, False),
    ],
)
def test_traces_are_on_only_when_an_otel_variable_asks_for_them(environ, configured):
    assert telemetry.is_configured(environ) is configured


def test_unconfigured_tracing_makes_no_spans_and_no_traceparent(monkeypatch):
    for name in ("OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_SDK_DISABLED"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    assert telemetry.configure_from_environment("shop-api") is False
    assert not telemetry.is_enabled()
    with telemetry.dispatch_span("write", "q", "t") as span:
        assert span is telemetry.NOOP
        assert telemetry.trace_headers() == {}


def test_an_unknown_exporter_is_refused_naming_the_ones_there_are(monkeypatch):
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "zipkin")
    try:
        with pytest.raises(ValueError, match="otlp, console, none"):
            telemetry.configure_from_environment("shop-api")
    finally:
        telemetry.disable()
    assert not telemetry.is_enabled()
