"""A server span for every HTTP request, when tracing is on (``platform/telemetry.py``)."""

from __future__ import annotations

from fastapi import FastAPI

from asanoha.platform import telemetry


def trace_requests(api: FastAPI) -> None:
    """Instrument ``api`` with OpenTelemetry's FastAPI instrumentation, into the platform's
    tracer provider; nothing while tracing is off. Call it before the app starts serving
    (it adds a middleware). Request and response bodies are never recorded."""
    provider = telemetry.tracer_provider()
    if provider is None:
        return
    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

    FastAPIInstrumentor.instrument_app(api, tracer_provider=provider)
