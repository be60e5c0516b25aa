"""A server span for every HTTP request, when tracing is on (``platform/telemetry.py``)."""

from __future__ import annotations

import os

from fastapi import FastAPI

from asanoha.platform import telemetry

#: Probes and scrapes, asked every few seconds, make no spans unless the standard variables
#: name other URLs to leave out.
EXCLUDED_URLS = "/health,/metrics"


def trace_requests(api: FastAPI) -> None:
    """Instrument ``api`` with OpenTelemetry's FastAPI instrumentation, into the platform's
    tracer provider; nothing while tracing is off. Call it before the app starts serving
    (it adds a middleware). Request and response bodies are never recorded."""
    provider = telemetry.tracer_provider()
    if provider is None:
        return
    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

    excluded = (
        os.environ.get("OTEL_PYTHON_FASTAPI_EXCLUDED_URLS")
        or os.environ.get("OTEL_PYTHON_EXCLUDED_URLS")
        or EXCLUDED_URLS
    )
    FastAPIInstrumentor.instrument_app(api, tracer_provider=provider, excluded_urls=excluded)
