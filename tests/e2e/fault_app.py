"""The application of the fault run (settings from ``ASANOHA_*``): an order written over HTTP
triggers a job that writes a stamp row, and a consumer with two partitions records every order
event it is given. Each side effect carries the order's number, so the test can count them."""

from __future__ import annotations

from typing import Any

from asanoha import Entity, Feature, fields
from asanoha.app import App
from asanoha.platform.consumers import ConsumerContext
from asanoha.platform.model import Access, Backoff
from asanoha.platform.store import StoredEvent

ORDER_CREATE = "faults:write:order:create"

feature = Feature("faults")
feature.crud(
    "order",
    Entity(table="faults_orders", fields={"n": fields.integer(required=True)}),
    write=Access(roles=["Admin"]),
    read=Access(roles=["Admin"]),
)
feature.crud(
    "stamp",
    Entity(table="faults_stamps", fields={"n": fields.integer(required=True)}),
    write=Access(roles=["system"]),
    read=Access(roles=["system", "Admin"]),
)
feature.entity(
    "seen",
    Entity(
        table="faults_seen",
        fields={
            "event_id": fields.integer(),
            "stream": fields.text(personal=False, reason="a stream id"),
            "stream_version": fields.integer(),
            "n": fields.integer(),
        },
    ),
)


@feature.job("stamp", on=ORDER_CREATE, retries=8, backoff=Backoff.fixed(1.0), timeout=5)
def stamp(payload: dict[str, Any], ctx: Any) -> None:
    """Writes the row that proves the order's job ran (retried through a database restart)."""
    ctx.write("faults:write:stamp:create", {"n": payload["n"]})


@feature.consumer("seen", on=["faults:event:order.created"], partitions=2, max_attempts=50)
def seen(event: StoredEvent, ctx: ConsumerContext) -> None:
    """One row per delivery, in the consumer's own transaction (with its cursor)."""
    ctx.entity("seen").create(
        {
            "event_id": event.id,
            "stream": event.stream_id,
            "stream_version": event.version,
            "n": event.payload["data"]["n"],
        }
    )


app = App([feature])
