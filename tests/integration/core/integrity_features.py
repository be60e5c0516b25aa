"""Fixture features for the integrity suite: entity streams, domain events, unique indexes,
personal values in events and job payloads."""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import BaseModel

from asanoha import Access, Agent, ConflictError, Entity, Feature, WriteContext, fields

ADMIN = Access(roles=["Admin"])

note = Entity(
    table="integrity_notes",
    soft_delete=True,
    fields={
        "title": fields.text(required=True, personal=False, reason="fixture"),
        "email": fields.text(personal="self"),
    },
)
handle = Entity(
    table="integrity_handles",
    fields={"name": fields.text(required=True, personal=False, reason="fixture")},
    unique=(("name",),),
)

integrity = Feature("integrity")
integrity.crud("note", note, write=ADMIN, read=ADMIN)
integrity.crud("handle", handle, write=ADMIN, read=ADMIN)


class Tag(BaseModel):
    tag: str


note_tagged = integrity.event("note-tagged", Tag)


class TagNote(BaseModel):
    id: uuid.UUID
    tag: str


@integrity.write_handler("tag-note", access=ADMIN)
def tag_note(payload: TagNote, ctx: WriteContext) -> Any:
    """The documented way to add a domain event to an entity's stream."""
    stored = ctx.append_event(note_tagged, {"tag": payload.tag}, stream_id=payload.id)
    return {"version": stored.version}


class AnyEvent(BaseModel):
    event: str
    stream_id: str
    payload: dict[str, Any]
    stream_type: str | None = None


@integrity.write_handler("append-any", access=ADMIN, agent=Agent(risk="mid"))
def append_any(payload: AnyEvent, ctx: WriteContext) -> Any:
    """Appends whatever event it is told to: the platform decides which ones it may."""
    stored = ctx.append_event(
        payload.event, payload.payload, stream_id=payload.stream_id, stream_type=payload.stream_type
    )
    return {"version": stored.version}


class Claim(BaseModel):
    name: str


@integrity.write_handler("claim-handle", access=ADMIN)
def claim_handle(payload: Claim, ctx: WriteContext) -> Any:
    """Create unless it exists: a lost claim is recorded as a note and the write goes on."""
    try:
        row = ctx.entity("handle").create({"name": payload.name})
    except ConflictError:
        ctx.entity("note").create({"title": f"lost claim on {payload.name}"})
        return {"claimed": False}
    return {"claimed": True, "id": str(row["id"])}


class RowId(BaseModel):
    id: uuid.UUID


@integrity.write_handler("forget-note", access=ADMIN, agent=Agent(risk="high"))
def forget_note(payload: RowId, ctx: WriteContext) -> Any:
    return ctx.entity("note").forget(payload.id)


class Retype(BaseModel):
    id: uuid.UUID
    count: int


@integrity.write_handler("retype-email", access=ADMIN)
def retype_email(payload: Retype, ctx: WriteContext) -> Any:
    """Changes a note's e-mail ``count`` times in one transaction: a long stream."""
    notes = ctx.entity("note")
    for n in range(payload.count):
        notes.update(payload.id, {"email": f"person-{n}@example.org"}, skip_optimistic_lock=True)
    return {"count": payload.count}


@integrity.job("note-changed", on="integrity:write:note:update")
def note_changed(payload: dict[str, Any], ctx: Any) -> None:
    """Carries the update payload (the row id and the changes) in its outbox row."""


@integrity.job("note-event", on="integrity:event:note.updated")
def note_event(payload: dict[str, Any], ctx: Any) -> None:
    """Carries the update event's payload (no row id, only the changes) in its outbox row."""


@integrity.pre_save("handle")
def break_reserved_names(
    changes: dict[str, Any], previous: dict[str, Any] | None, is_new: bool
) -> dict[str, Any]:
    """A buggy hook: it turns a reserved name into a number the field does not accept."""
    if changes.get("name") == "reserved":
        changes["name"] = {"not": "text"}
    return changes


other = Feature("other")


class Ping(BaseModel):
    n: int


other.event("pinged", Ping)
