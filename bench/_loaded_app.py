"""The application of ``bench/client_load.py`` (settings from ``ASANOHA_*``): each create
of a note starts a job that writes a row, and appends an event that a consumer with four
partitions copies into a row of its own, as the probe's mixed load does."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from asanoha import Access, App, Entity, Feature, fields
from asanoha.platform.consumers import ConsumerContext
from asanoha.platform.store import StoredEvent

POST_QN = "loaded:write:post"
WRITER = Access(roles=["writer"])


class Post(BaseModel):
    title: str
    amount: int


feature = Feature("loaded")
feature.entity(
    "note",
    Entity(
        table="loaded_notes",
        fields={
            "title": fields.text(required=True, personal=False, reason="benchmark data"),
            "amount": fields.integer(),
        },
    ),
)
feature.entity("mark", Entity(table="loaded_marks", fields={"amount": fields.integer()}))
feature.entity("copy", Entity(table="loaded_copies", fields={"event_id": fields.integer()}))
posted = feature.event("posted", Post)


@feature.write_handler("post", access=WRITER)
def post(payload: Post, ctx: Any) -> str:
    row = ctx.entity("note").create(payload.model_dump())
    ctx.append_event(posted, payload, stream_id=str(row["id"]))
    return str(row["id"])


class Mark(BaseModel):
    amount: int


@feature.write_handler("mark", access=Access(roles=["system"]))
def record_mark(payload: Mark, ctx: Any) -> None:
    ctx.entity("mark").create(payload.model_dump())


@feature.job("mark", on=POST_QN, timeout=30)
def mark(payload: dict[str, Any], ctx: Any) -> None:
    """A job that writes one row through the write path, as most jobs do."""
    ctx.write("loaded:write:mark", {"amount": payload["amount"]})


@feature.consumer("copy", on=[posted.qn], partitions=4)
def copy(event: StoredEvent, ctx: ConsumerContext) -> None:
    ctx.entity("copy").create({"event_id": event.id})


app = App(features=[feature])
