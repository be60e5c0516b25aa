"""Traces: the spans of dispatches, events, job attempts and consumer deliveries, and the
trace context a job row and an event carry (W3C ``traceparent``).

OpenTelemetry is optional (``asanoha[otel]``) and this is the only module that imports it.
Until ``configure_from_environment`` (``asanoha serve``, ``worker``, ``beat``) or
``use_tracer_provider`` (tests) turns tracing on, every span below is one shared no-op
object and ``trace_headers()`` is empty: the platform pays a function call per span.

Attributes name handlers, jobs, streams and outcomes, never a payload value.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlalchemy import Engine

log = logging.getLogger("asanoha.telemetry")

#: The header (job rows) and metadata key (events) that carry the trace context.
TRACEPARENT = "traceparent"
#: The instrumentation scope of the platform's spans.
SCOPE = "asanoha"
#: Exporters ``OTEL_TRACES_EXPORTER`` may name.
EXPORTERS = ("otlp", "console", "none")


class TelemetryUnavailableError(RuntimeError):
    """Traces were asked for (``OTEL_*``) but OpenTelemetry is not installed."""


class _Tracing:
    """What tracing runs on while it is on: the tracer provider, its tracer and the W3C
    propagator. Kept here rather than in OpenTelemetry's global provider, which can be set
    only once per process (tests swap providers)."""

    def __init__(self, provider: Any) -> None:
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        self.provider = provider
        self.tracer = provider.get_tracer(SCOPE)
        self.propagator = TraceContextTextMapPropagator()


#: ``None``: tracing is off.
_tracing: _Tracing | None = None
#: Whether SQL statements get spans of their own (``ASANOHA_TRACE_SQL``).
_trace_sql = False


# -- turning it on --------------------------------------------------------------------------


def is_configured(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the ``OTEL_*`` variables ask for traces: an exporter other than ``none``, or
    an OTLP endpoint, and the SDK not disabled."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter:
        return exporter != "none"
    return bool(
        env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


def configure_from_environment(
    service_name: str, *, engines: Iterable[Engine] = (), trace_sql: bool = False
) -> bool:
    """Turn tracing on as the standard ``OTEL_*`` variables say (exporter, endpoint, service
    name, sampler, batch sizes); return whether it is on. Without such a variable nothing is
    imported and nothing changes. ``OTEL_SERVICE_NAME`` wins over ``service_name``.

    With ``trace_sql`` every statement of ``engines`` gets a span (SQLAlchemy's
    instrumentation: the statement text, never its parameters).

    Raises ``TelemetryUnavailableError`` when traces are asked for without ``asanoha[otel]``,
    and ``ValueError`` for an exporter this platform does not know.
    """
    if not is_configured():
        return False
    if _tracing is not None:
        return True
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        raise TelemetryUnavailableError(
            "OTEL_TRACES_EXPORTER or OTEL_EXPORTER_OTLP_ENDPOINT asks for traces, but "
            "OpenTelemetry is not installed: pip install 'asanoha[otel]', or unset them"
        ) from None
    resource = Resource.create(
        {"service.name": os.environ.get("OTEL_SERVICE_NAME") or service_name}
    )
    provider = TracerProvider(resource=resource)
    for exporter in _exporters(os.environ.get("OTEL_TRACES_EXPORTER") or "otlp"):
        provider.add_span_processor(BatchSpanProcessor(exporter))
    use_tracer_provider(provider, engines=engines, trace_sql=trace_sql)
    log.info("traces are exported (%s)", os.environ.get("OTEL_TRACES_EXPORTER") or "otlp")
    return True


def _exporters(names: str) -> list[Any]:
    exporters: list[Any] = []
    for name in (part.strip().lower() for part in names.split(",")):
        if name in ("otlp", "otlp_proto_http"):
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporters.append(OTLPSpanExporter())
        elif name == "console":
            from opentelemetry.sdk.trace.export import ConsoleSpanExporter

            exporters.append(ConsoleSpanExporter())
        elif name and name != "none":
            raise ValueError(
                f"OTEL_TRACES_EXPORTER={name!r} is not supported; use one of "
                f"{', '.join(EXPORTERS)} (otlp sends over HTTP: OTEL_EXPORTER_OTLP_ENDPOINT)"
            )
    return exporters


def use_tracer_provider(
    provider: Any, *, engines: Iterable[Engine] = (), trace_sql: bool = False
) -> None:
    """Trace into ``provider`` (an OpenTelemetry SDK ``TracerProvider``) from now on: for
    tests with an in-memory exporter, or an application that builds its own provider."""
    global _tracing, _trace_sql
    _tracing = _Tracing(provider)
    _trace_sql = trace_sql
    for engine in engines:
        instrument_engine(engine)


def disable() -> None:
    """Turn tracing off again (spans already made stay with their provider)."""
    global _tracing, _trace_sql
    if _sql_engines:
        from sqlalchemy import event

        for engine in _sql_engines:
            event.remove(engine, "before_cursor_execute", _before_statement)
            event.remove(engine, "after_cursor_execute", _after_statement)
            event.remove(engine, "handle_error", _failed_statement)
        _sql_engines.clear()
    _tracing = None
    _trace_sql = False


def is_enabled() -> bool:
    """Whether spans are made."""
    return _tracing is not None


def tracer_provider() -> Any:
    """The provider spans go to, or ``None`` while tracing is off (for instrumentations)."""
    return None if _tracing is None else _tracing.provider


def flush() -> None:
    """Export the spans still buffered (a pool process about to exit)."""
    if _tracing is not None:
        _tracing.provider.force_flush()


def instrument_engine(engine: Engine) -> None:
    """Spans for the statements of ``engine``, when tracing and SQL tracing are on: the
    statement's text (with its placeholders), never its parameters.

    Listeners of the platform's own rather than opentelemetry-instrumentation-sqlalchemy,
    which does not support SQLAlchemy 2.1 (it fails statements that run without an execution
    context)."""
    if _tracing is None or not _trace_sql or engine in _sql_engines:
        return
    from sqlalchemy import event

    event.listen(engine, "before_cursor_execute", _before_statement)
    event.listen(engine, "after_cursor_execute", _after_statement)
    event.listen(engine, "handle_error", _failed_statement)
    _sql_engines.append(engine)


#: Engines whose statements get spans (``disable`` takes the listeners off again).
_sql_engines: list[Engine] = []
#: Where a connection keeps the spans of its statements still running.
_SQL_SPANS = "asanoha_sql_spans"


def _before_statement(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
    if _tracing is None:
        return
    from opentelemetry.trace import SpanKind

    operation = statement.lstrip().split(None, 1)[0].upper() if statement.strip() else "SQL"
    span = _tracing.tracer.start_span(
        operation,
        kind=SpanKind.CLIENT,
        attributes={"db.system": conn.dialect.name, "db.statement": statement},
    )
    conn.info.setdefault(_SQL_SPANS, []).append(span)


def _after_statement(conn: Any, *_: Any) -> None:
    spans = conn.info.get(_SQL_SPANS)
    if spans:
        spans.pop().end()


def _failed_statement(context: Any) -> None:
    conn = context.connection
    spans = conn.info.get(_SQL_SPANS) if conn is not None else None
    if spans:
        from opentelemetry.trace import Status, StatusCode

        span = spans.pop()
        span.set_status(Status(StatusCode.ERROR, type(context.original_exception).__name__))
        span.end()


# -- context --------------------------------------------------------------------------------


def trace_headers() -> dict[str, str]:
    """``{"traceparent": ...}`` of the current span, for a job row's headers or an event's
    metadata; empty while tracing is off or no span is current."""
    if _tracing is None:
        return {}
    from opentelemetry import trace

    # Written here rather than by the propagator's inject: this runs for every job row and
    # event, and the W3C format is fixed (the trace state is not carried).
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return {}
    return {
        TRACEPARENT: f"00-{context.trace_id:032x}-{context.span_id:016x}-"
        f"{int(context.trace_flags):02x}"
    }


def current_ids() -> tuple[str, str] | None:
    """``(trace id, span id)`` of the current span as hex, for log lines; ``None`` while
    tracing is off or no span is current."""
    if _tracing is None:
        return None
    from opentelemetry import trace

    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return f"{context.trace_id:032x}", f"{context.span_id:016x}"


def _extract(traceparent: Any) -> Any:
    """The OpenTelemetry context a ``traceparent`` value names (``None``: none)."""
    assert _tracing is not None
    if not isinstance(traceparent, str) or not traceparent:
        return None
    return _tracing.propagator.extract({TRACEPARENT: traceparent})


# -- spans ----------------------------------------------------------------------------------


class Span:
    """A span of the platform's, entered as a context manager. The base class is the no-op
    every call gets while tracing is off; ``_Recording`` does the work."""

    def __enter__(self) -> Span:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        return None

    def set(self, name: str, value: str | int | bool | None) -> None:
        """Set the attribute ``asanoha.<name>`` (``None`` is left out)."""

    def outcome(self, outcome: str, reason: str | None = None) -> None:
        """Record how the work ended (``ok``, ``refused``, ``failed``, ...) and why."""


NOOP = Span()


class _Recording(Span):
    """A span of the SDK, made current while the block runs. Attributes set during the block
    are kept and given to the span once, as it ends (one lock instead of one per value)."""

    def __init__(
        self,
        name: str,
        attributes: Mapping[str, str | int | bool | None],
        *,
        parent: Any = None,
        links: Iterable[Any] = (),
    ) -> None:
        self._name = name
        self._attributes = {
            f"asanoha.{key}": value for key, value in attributes.items() if value is not None
        }
        self._parent = parent
        self._links = links
        self._later: dict[str, str | int | bool] = {}
        self._failed: str | None = None
        self._token: Any = None
        self.span: Any = None

    def __enter__(self) -> Span:
        from opentelemetry import context, trace

        assert _tracing is not None
        self.span = _tracing.tracer.start_span(
            self._name,
            context=self._parent,
            attributes=self._attributes,
            links=self._links,
            record_exception=False,
            set_status_on_exception=False,
        )
        self._token = context.attach(trace.set_span_in_context(self.span, self._parent))
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        from opentelemetry import context

        if "asanoha.outcome" not in self._later:
            self.outcome(*(("ok", None) if error is None else outcome_of(error)))
        context.detach(self._token)
        self.span.set_attributes(self._later)
        if self._failed is not None:
            from opentelemetry.trace import Status, StatusCode

            self.span.set_status(Status(StatusCode.ERROR, self._failed))
        self.span.end()

    def set(self, name: str, value: str | int | bool | None) -> None:
        if value is not None:
            self._later[f"asanoha.{name}"] = value

    def outcome(self, outcome: str, reason: str | None = None) -> None:
        self.set("outcome", outcome)
        self.set("reason", reason)
        if outcome == "failed":
            self._failed = reason or "failed"


def outcome_of(error: BaseException) -> tuple[str, str]:
    """``(outcome, reason)`` of an exception: a platform refusal names its reason (4xx:
    ``refused``); anything else failed, named by its class (never its message, which may
    quote a payload)."""
    reason = getattr(error, "reason", None)
    status = getattr(error, "http_status", None)
    if isinstance(reason, str):
        refused = isinstance(status, int) and 400 <= status < 500
        return ("refused" if refused else "failed"), reason
    return "failed", type(error).__name__


def dispatch_span(kind: str, qn: str, tenant: str) -> Span:
    """The span of a top-level ``dispatch_write`` / ``dispatch_query`` of handler ``qn``."""
    if _tracing is None:
        return NOOP
    return _Recording(f"asanoha.{kind} {qn}", {"handler": qn, "tenant": tenant})


def event_span(event_type: str, stream_id: str) -> Span:
    """The span of one event append; its position is set once the row is in."""
    if _tracing is None:
        return NOOP
    return _Recording(
        f"asanoha.event {event_type}", {"event.type": event_type, "stream": stream_id}
    )


def job_attempt_span(
    job_qn: str, job_id: str, attempt: int, final: bool, tenant: str, traceparent: Any
) -> Span:
    """The span of one attempt of a job, in the trace its row's ``traceparent`` names."""
    if _tracing is None:
        return NOOP
    return _Recording(
        f"asanoha.job {job_qn}",
        {"job": job_qn, "job.id": job_id, "attempt": attempt, "final": final, "tenant": tenant},
        parent=_extract(traceparent),
    )


def consumer_pass_span(consumer_qn: str, events: Sequence[Any]) -> Span:
    """The span of one pass of a consumer over ``events`` (stored events): a trace of its
    own, linked to the trace of every event it delivers (a batch has as many causes as
    events). A pass that found nothing makes no span."""
    if _tracing is None or not events:
        return NOOP
    from opentelemetry import trace

    links: dict[int, Any] = {}
    for event in events:
        parent = _extract(event.metadata.get(TRACEPARENT))
        cause = trace.get_current_span(parent).get_span_context() if parent else None
        if cause is not None and cause.is_valid and cause.span_id not in links:
            links[cause.span_id] = trace.Link(cause, {"asanoha.event.position": event.id})
    return _Recording(
        f"asanoha.consumer.pass {consumer_qn}",
        {"consumer": consumer_qn, "events": len(events)},
        links=links.values(),
    )


def delivery_span(consumer_qn: str, event_id: int, event_type: str, metadata: Any) -> Span:
    """The span of one delivery of an event to a consumer: in the trace of the write that
    appended the event (its metadata's ``traceparent``), linked to the pass."""
    if _tracing is None:
        return NOOP
    from opentelemetry import trace

    pass_context = trace.get_current_span().get_span_context()
    parent = _extract(metadata.get(TRACEPARENT) if isinstance(metadata, Mapping) else None)
    links = [trace.Link(pass_context)] if pass_context.is_valid else []
    return _Recording(
        f"asanoha.consumer {consumer_qn}",
        {"consumer": consumer_qn, "event.position": event_id, "event.type": event_type},
        parent=parent,
        links=links,
    )
