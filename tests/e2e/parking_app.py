"""The application of the parked-tenant test (settings from ``ASANOHA_*``): a toggleable
feature whose write appends an event and whose consumer records each delivery (tenant,
stream, number, process) in a row."""

from __future__ import annotations

import os
from typing import Any

from pydantic import BaseModel

from asanoha import Access, Entity, Feature, fields
from asanoha.app import App
from asanoha.platform.consumers import ConsumerContext
from asanoha.platform.store import StoredEvent

CONSUMER = "parks:consumer:record"


class Post(BaseModel):
    stream: str
    n: int


feature = Feature("parks", toggleable=True)
feature.entity(
    "delivery",
    Entity(
        table="parks_deliveries",
        fields={
            "tenant": fields.text(personal=False, reason="a tenant id"),
            "stream": fields.text(personal=False, reason="a stream id"),
            "n": fields.integer(),
            "process": fields.integer(),
        },
    ),
)
feature.event("posted", Post)


@feature.write_handler("post", access=Access(roles=["Admin"]))
def post(payload: Post, ctx: Any) -> int:
    event = ctx.append_event("parks:event:posted", payload, stream_id=payload.stream)
    return int(event.id)


@feature.consumer("record", on=["parks:event:posted"], partitions=2)
def record(event: StoredEvent, ctx: ConsumerContext) -> None:
    ctx.entity("delivery").create(
        {
            "tenant": event.tenant_id,
            "stream": event.stream_id,
            "n": event.payload["n"],
            "process": os.getpid(),
        }
    )


app = App([feature])
