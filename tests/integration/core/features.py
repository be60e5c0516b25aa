"""Fixture features for the core suite: gated entities and handlers of every risk."""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

from pydantic import BaseModel

from asanoha import Access, Agent, Entity, Feature, WriteContext, fields

ADMIN = Access(roles=["Admin"])

prompt = Entity(
    table="prompts",
    fields={
        "label": fields.text(
            required=True, personal=False, reason="fixture", sortable=True, filterable=True
        ),
        "body": fields.long_text(personal=False, reason="fixture", read_as_instruction=True),
    },
)
memo = Entity(
    table="memos",
    soft_delete=True,
    fields={
        "title": fields.text(required=True, personal=False, reason="fixture"),
        "hint": fields.long_text(personal=False, reason="fixture", read_as_instruction=True),
    },
)
contact = Entity(
    table="contacts",
    fields={
        "email": fields.text(personal="self"),
        "topic": fields.text(personal=False, reason="a category, not about a person"),
    },
)

gate = Feature("instructiongate")
gate.crud("prompt", prompt, write=ADMIN, read=ADMIN)
gate.crud("memo", memo, write=ADMIN, read=ADMIN)
gate.entity("contact", contact)


class CreatePrompt(BaseModel):
    label: str
    body: str | None = None


class UpdatePrompt(BaseModel):
    id: uuid.UUID
    version: int
    label: str | None = None
    body: str | None = None


class RowId(BaseModel):
    id: uuid.UUID


class CreateMemo(BaseModel):
    title: str


class Contact(BaseModel):
    email: str | None = None
    topic: str | None = None


def _create_prompt(payload: CreatePrompt, ctx: WriteContext) -> Any:
    return ctx.entity("prompt").create(payload.model_dump(exclude_none=True))


def _update_prompt(payload: UpdatePrompt, ctx: WriteContext) -> Any:
    changes = payload.model_dump(exclude_unset=True, exclude={"id", "version"})
    return ctx.entity("prompt").update(payload.id, changes, version=payload.version)


for risk in ("mid", "high"):
    gate.write_handler(f"create-prompt-{risk}", access=ADMIN, agent=Agent(risk=risk))(
        _create_prompt
    )  # type: ignore[arg-type]
    gate.write_handler(f"update-prompt-{risk}", access=ADMIN, agent=Agent(risk=risk))(
        _update_prompt
    )  # type: ignore[arg-type]


@gate.write_handler("delegate-update-mid", access=ADMIN, agent=Agent(risk="mid"))
def delegate_update_mid(payload: UpdatePrompt, ctx: WriteContext) -> Any:
    changes = payload.model_dump(exclude_unset=True, exclude={"id", "version"})
    return ctx.write(
        "instructiongate:write:prompt:update",
        {"id": str(payload.id), "version": payload.version, "changes": changes},
    )


@gate.write_handler("delete-prompt-mid", access=ADMIN, agent=Agent(risk="mid"))
def delete_prompt_mid(payload: RowId, ctx: WriteContext) -> Any:
    return ctx.entity("prompt").delete(payload.id)


@gate.write_handler("delete-prompt-high", access=ADMIN, agent=Agent(risk="high"))
def delete_prompt_high(payload: RowId, ctx: WriteContext) -> Any:
    return ctx.entity("prompt").delete(payload.id)


@gate.write_handler("forget-prompt-mid", access=ADMIN, agent=Agent(risk="mid"))
def forget_prompt_mid(payload: RowId, ctx: WriteContext) -> Any:
    return ctx.entity("prompt").forget(payload.id)


@gate.write_handler("forget-prompt-high", access=ADMIN, agent=Agent(risk="high"))
def forget_prompt_high(payload: RowId, ctx: WriteContext) -> Any:
    return ctx.entity("prompt").forget(payload.id)


@gate.write_handler("delegate-delete-mid", access=ADMIN, agent=Agent(risk="mid"))
def delegate_delete_mid(payload: RowId, ctx: WriteContext) -> Any:
    return ctx.write("instructiongate:write:delete-prompt-high", {"id": str(payload.id)})


@gate.write_handler("create-memo-mid", access=ADMIN, agent=Agent(risk="mid"))
def create_memo_mid(payload: CreateMemo, ctx: WriteContext) -> Any:
    return ctx.entity("memo").create(payload.model_dump())


@gate.write_handler("delete-memo-mid", access=ADMIN, agent=Agent(risk="mid"))
def delete_memo_mid(payload: RowId, ctx: WriteContext) -> Any:
    return ctx.entity("memo").delete(payload.id)


@gate.pre_save("memo")
def add_hint_to_auto_memos(
    changes: dict[str, Any], previous: dict[str, Any] | None, is_new: bool
) -> dict[str, Any]:
    if str(changes.get("title", "")).startswith("auto:"):
        changes["hint"] = "summarise the conversation"
    return changes


@gate.write_handler(
    "submit-contact",
    access=Access(public="contact form", public_intake=True),
    rate_limit=None,
    reason="a test fixture",
)
def submit_contact(payload: Contact, ctx: WriteContext) -> Any:
    return ctx.entity("contact").create(payload.model_dump(exclude_none=True))


@gate.write_handler(
    "submit-topic",
    access=Access(public="topic voting"),
    rate_limit=None,
    reason="a test fixture",
)
def submit_topic(payload: Contact, ctx: WriteContext) -> Any:
    return ctx.entity("contact").create(payload.model_dump(exclude_none=True))


@gate.job("notify-prompt", on="instructiongate:write:create-prompt-mid")
def notify_prompt(payload: dict[str, Any], ctx: Any) -> None:
    """Runs after a prompt was created through the mid-risk handler."""


@gate.job("notify-high-prompt", on="instructiongate:write:create-prompt-high")
def notify_high_prompt(payload: dict[str, Any], ctx: Any) -> None:
    """Runs after a prompt was created through the high-risk handler."""


class PromptNote(BaseModel):
    prompt_id: uuid.UUID
    text: str


note_added = gate.event("prompt-note-added", PromptNote)


class Pair(BaseModel):
    first: str
    second_body: str


@gate.write_handler("create-pair-mid", access=ADMIN, agent=Agent(risk="mid"))
def create_pair_mid(payload: Pair, ctx: WriteContext) -> Any:
    """Creates one plain prompt, then tries a flagged one and keeps going when it is denied."""
    from asanoha import AccessDeniedError

    kept = ctx.write("instructiongate:write:create-prompt-mid", {"label": payload.first})
    with contextlib.suppress(AccessDeniedError):
        ctx.write(
            "instructiongate:write:create-prompt-mid",
            {"label": "flagged", "body": payload.second_body},
        )
    return kept


@gate.write_handler("annotate-prompt", access=ADMIN)
def annotate_prompt(payload: PromptNote, ctx: WriteContext) -> Any:
    stored = ctx.append_event(note_added, payload, stream_id=f"notes-{payload.prompt_id}")
    return {"position": stored.id, "version": stored.version}


saved_rows: list[dict[str, Any]] = []


@gate.post_save("memo")
def remember_saved_memo(row: dict[str, Any], executor: Any) -> None:
    saved_rows.append(row)


class Search(BaseModel):
    label: str


@gate.query_handler("find-or-create", access=ADMIN)
def find_or_create(payload: Search, ctx: Any) -> Any:
    """A query that tries to write: query handlers get only read verbs."""
    found = ctx.entity("prompt").list(filter={"label": payload.label})["rows"]
    return found or ctx.entity("prompt").create({"label": payload.label})
