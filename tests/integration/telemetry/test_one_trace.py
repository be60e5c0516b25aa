"""One trace from an HTTP write to the second job it causes: the write, its job (a failed
attempt and its retry), the event the job's write appends, the consumer that delivers the
event, and the job the consumer dispatches, on a stack with a real worker."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import BaseModel

from asanoha import Access, Backoff, Entity, Feature, SessionUser, fields
from asanoha.platform import telemetry
from asanoha.platform.consumers import ConsumerContext
from asanoha.platform.model import SYSTEM_ROLE
from asanoha.platform.store import StoredEvent

#: A payload value: no span attribute may hold it.
SECRET = "payload-value-5b0c2e"
EDITOR = SessionUser.of("u-1", "tenant-a", ["Editor"])


class Stamp(BaseModel):
    text: str


def shop(attempts: list[int], finished: list[str]) -> Feature:
    feature = Feature("shop")
    note = Entity(table="notes", fields={"text": fields.text(personal=False, reason="fixture")})
    feature.crud("note", note, write=Access(roles=["Editor"]), read=Access(roles=["Editor"]))
    stamped = feature.event("stamped", Stamp)

    @feature.write_handler("stamp", access=Access(roles=[SYSTEM_ROLE]))
    def stamp(payload: Stamp, ctx: Any) -> int:
        return int(ctx.append_event(stamped, {"text": payload.text}, stream_id="stamps").id)

    @feature.job("mark", on="shop:write:note:create", retries=1, backoff=Backoff.fixed(0))
    def mark(payload: dict[str, Any], ctx: Any) -> None:
        attempts.append(ctx.attempt)
        if ctx.attempt == 1:
            raise RuntimeError("the first attempt fails")
        ctx.write("shop:write:stamp", {"text": payload["text"]})

    @feature.consumer("follow", on=[stamped.qn])
    def follow(event: StoredEvent, ctx: ConsumerContext) -> None:
        ctx.dispatch("shop:job:finish", {"text": event.payload["text"]})

    @feature.job("finish", manual=True)
    def finish(payload: dict[str, Any], ctx: Any) -> None:
        finished.append(payload["text"])

    return feature


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


def named(found: list[ReadableSpan], prefix: str) -> list[ReadableSpan]:
    return [span for span in found if span.name.startswith(prefix)]


@pytest.mark.parametrize("database", ["postgres", "sqlite"])
def test_an_http_write_its_jobs_events_and_consumer_share_one_trace(asanoha_stack, spans, database):
    attempts: list[int] = []
    finished: list[str] = []
    stack = asanoha_stack([shop(attempts, finished)], jobs=True, database=database)
    stack.http.write_ok("shop:write:note:create", {"text": SECRET}, EDITOR)
    stack.drain(timeout=30)
    assert attempts == [1, 2] and finished == [SECRET]

    found = list(spans.get_finished_spans())
    (server,) = [span for span in found if span.kind.name == "SERVER"]
    trace_id = server.context.trace_id
    for span in found:
        linked = {link.context.trace_id for link in span.links}
        assert span.context.trace_id == trace_id or trace_id in linked, span.name
        for name, value in (span.attributes or {}).items():
            assert SECRET not in str(value), f"{span.name} {name} holds a payload value"

    (write,) = [s for s in found if s.name == "asanoha.write shop:write:note:create"]
    assert write.parent is not None and write.parent.trace_id == trace_id
    assert write.attributes is not None
    assert write.attributes["asanoha.handler"] == "shop:write:note:create"
    assert write.attributes["asanoha.tenant"] == "tenant-a"
    assert write.attributes["asanoha.entry.handler"] == "shop:write:note:create"
    assert write.attributes["asanoha.entry.risk"] in ("low", "mid", "high")
    assert write.attributes["asanoha.outcome"] == "ok"

    marks = sorted(named(found, "asanoha.job shop:job:mark"), key=lambda s: s.start_time or 0)
    assert [(s.attributes or {}).get("asanoha.attempt") for s in marks] == [1, 2]
    assert [(s.attributes or {}).get("asanoha.outcome") for s in marks] == ["retrying", "ok"]
    assert [(s.attributes or {}).get("asanoha.final") for s in marks] == [False, True]
    assert (marks[0].attributes or {}).get("asanoha.reason") == "RuntimeError"
    # Both attempts are children of the write that enqueued the job.
    assert {s.parent.span_id for s in marks if s.parent} == {write.context.span_id}

    (stamp,) = named(found, "asanoha.write shop:write:stamp")
    assert stamp.parent is not None and stamp.parent.span_id == marks[1].context.span_id
    events = named(found, "asanoha.event shop:event:stamped")
    (event,) = events
    assert event.attributes is not None
    assert event.attributes["asanoha.stream"] == "stamps"
    assert isinstance(event.attributes["asanoha.event.position"], int)
    assert event.parent is not None and event.parent.span_id == stamp.context.span_id

    (delivery,) = named(found, "asanoha.consumer shop:consumer:follow")
    assert delivery.parent is not None and delivery.parent.span_id == stamp.context.span_id
    assert delivery.attributes is not None
    assert (
        delivery.attributes["asanoha.event.position"] == event.attributes["asanoha.event.position"]
    )
    passes = [
        span
        for span in named(found, "asanoha.consumer.pass shop:consumer:follow")
        if any(link.context.trace_id == trace_id for link in span.links)
    ]
    assert passes, "no pass of the consumer links to the write's trace"

    (finish,) = named(found, "asanoha.job shop:job:finish")
    assert finish.parent is not None and finish.parent.span_id == delivery.context.span_id
    assert (finish.attributes or {}).get("asanoha.outcome") == "ok"


def test_without_a_tracer_provider_no_job_row_or_event_carries_a_traceparent(asanoha_stack):
    stack = asanoha_stack([shop([], [])])
    stack.http.write_ok("shop:write:note:create", {"text": "x"}, EDITOR)
    with stack.db.connect() as conn:
        headers = [row.headers for row in conn.execute(stack.tables.outbox.select())]
        metadata = [row.metadata for row in conn.execute(stack.tables.events.select())]
    assert headers and metadata
    assert all("traceparent" not in found for found in headers + metadata)


def test_with_sql_tracing_each_statement_of_a_write_is_a_span_without_its_values(asanoha_stack):
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    stack = asanoha_stack([shop([], [])])
    telemetry.use_tracer_provider(provider, engines=[stack.db.engine], trace_sql=True)
    try:
        stack.service.dispatch_write("shop:write:note:create", {"text": SECRET}, EDITOR)
    finally:
        telemetry.disable()
    found = list(exporter.get_finished_spans())
    (write,) = named(found, "asanoha.write shop:write:note:create")
    statements = [
        span
        for span in found
        if "db.statement" in (span.attributes or {})
        and span.parent is not None
        and span.context.trace_id == write.context.trace_id
    ]
    assert any("INSERT INTO notes" in str((s.attributes or {})["db.statement"]) for s in statements)
    for span in found:
        for value in (span.attributes or {}).values():
            assert SECRET not in str(value)


def test_health_probes_make_no_spans(asanoha_stack, spans):
    stack = asanoha_stack([shop([], [])])
    assert stack.http.client.get("/health").status_code == 200
    stack.http.write_ok("shop:write:note:create", {"text": "x"}, EDITOR)
    servers = [s for s in spans.get_finished_spans() if s.kind.name == "SERVER"]
    assert [s.name for s in servers] == ["POST /api/write/shop:write:note:create"]


def test_a_batch_is_a_span_and_each_item_the_span_a_single_write_makes(asanoha_stack, spans):
    stack = asanoha_stack([shop([], [])])
    create = "shop:write:note:create"
    stack.http.batch_ok([(create, {"text": SECRET}), (create, {"text": "b"})], EDITOR)
    found = list(spans.get_finished_spans())
    (server,) = [span for span in found if span.kind.name == "SERVER"]
    (batch,) = named(found, "asanoha.batch")
    assert batch.parent is not None and batch.parent.span_id == server.context.span_id
    assert batch.attributes is not None
    assert batch.attributes["asanoha.tenant"] == "tenant-a"
    assert batch.attributes["asanoha.outcome"] == "ok"
    items = named(found, f"asanoha.write {create}")
    assert len(items) == 2
    for item in items:
        assert item.parent is not None and item.parent.span_id == batch.context.span_id
        assert item.attributes is not None
        assert item.attributes["asanoha.handler"] == create
        assert item.attributes["asanoha.tenant"] == "tenant-a"
        assert item.attributes["asanoha.entry.handler"] == create
        assert item.attributes["asanoha.entry.risk"] in ("low", "mid", "high")
        assert item.attributes["asanoha.outcome"] == "ok"
    for span in found:
        for value in (span.attributes or {}).values():
            assert SECRET not in str(value)


def test_the_failing_item_of_a_batch_and_the_batch_record_the_refusal(asanoha_stack, spans):
    stack = asanoha_stack([shop([], [])])
    create = "shop:write:note:create"
    stack.http.batch_err([(create, {"text": "a"}), (create, {"text": 5})], EDITOR)
    found = list(spans.get_finished_spans())
    (batch,) = named(found, "asanoha.batch")
    assert (batch.attributes or {}).get("asanoha.outcome") == "refused"
    outcomes = [(s.attributes or {}).get("asanoha.outcome") for s in named(found, "asanoha.write")]
    assert sorted(outcomes) == ["ok", "refused"]
