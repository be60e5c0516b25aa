"""Fixture features of chains that continue in jobs and consumers after an agent's call.

``chain``: mid-risk tools whose jobs do what only a high-risk call may (forget a row,
rewrite instruction text), once without and once with ``acts_for_system``. ``echo`` and
``sweep``: consumers that forget the row whose creation they follow, without and with it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from asanoha import (
    Access,
    Agent,
    ConsumerContext,
    Entity,
    Feature,
    JobContext,
    WriteContext,
    fields,
)
from asanoha.platform.model import SessionUser
from asanoha.platform.store import StoredEvent
from asanoha.testing.users import TENANT_A

ADMIN = Access(roles=["Admin"])
JOBS_ONLY = Access(roles=["system"])
#: The person whose identity a job borrows for its write.
PERSON = SessionUser.of("admin-a", TENANT_A, ["Admin"])


def _text() -> Any:
    return fields.text(required=True, personal=False, reason="fixture")


note = Entity(table="chain_notes", fields={"title": _text()})
prompt = Entity(
    table="chain_prompts",
    fields={
        "label": _text(),
        "body": fields.long_text(personal=False, reason="fixture", read_as_instruction=True),
    },
)

chain = Feature("chain")
chain.crud("note", note, write=ADMIN, read=ADMIN)
chain.crud("prompt", prompt, write=ADMIN, read=ADMIN)


class Target(BaseModel):
    id: str


class Suggestion(BaseModel):
    id: str
    version: int
    body: str


@chain.write_handler("request-cleanup", access=ADMIN, description="Ask for a note's removal.")
def request_cleanup(payload: Target, ctx: WriteContext) -> dict[str, str]:
    """Mid risk: it only asks; its job does the forgetting."""
    return {"id": payload.id}


@chain.write_handler(
    "request-retention", access=ADMIN, description="Ask the retention sweep to run."
)
def request_retention(payload: Target, ctx: WriteContext) -> dict[str, str]:
    return {"id": payload.id}


@chain.write_handler("erase-note", access=JOBS_ONLY, agent=Agent(risk="high"))
def erase_note(payload: Target, ctx: WriteContext) -> Any:
    return ctx.entity("note").forget(payload.id)


@chain.job("cleanup", on="chain:write:request-cleanup")
def cleanup(payload: dict[str, Any], ctx: JobContext) -> None:
    ctx.write("chain:write:erase-note", {"id": payload["id"]})


@chain.job(
    "retention",
    on="chain:write:request-retention",
    acts_for_system="the retention policy forgets notes, whoever asked for the sweep",
)
def retention(payload: dict[str, Any], ctx: JobContext) -> None:
    ctx.write("chain:write:erase-note", {"id": payload["id"]})


@chain.write_handler(
    "retire", access=ADMIN, agent=Agent(risk="high"), description="Retire a note for good."
)
def retire(payload: Target, ctx: WriteContext) -> dict[str, str]:
    """High risk: an agent needs a person's approval; its job then forgets the note."""
    return {"id": payload.id}


@chain.job("retire-note", on="chain:write:retire")
def retire_note(payload: dict[str, Any], ctx: JobContext) -> None:
    ctx.write("chain:write:erase-note", {"id": payload["id"]})


@chain.write_handler("suggest", access=ADMIN, description="Suggest a prompt's new text.")
def suggest(payload: Suggestion, ctx: WriteContext) -> dict[str, str]:
    """Mid risk: writes nothing itself; its job applies the text as a person."""
    return {"id": payload.id}


@chain.write_handler(
    "suggest-reviewed", access=ADMIN, description="Suggest a text a reviewer applies."
)
def suggest_reviewed(payload: Suggestion, ctx: WriteContext) -> dict[str, str]:
    return {"id": payload.id}


def _apply(payload: dict[str, Any], ctx: JobContext) -> None:
    ctx.write_as(
        PERSON,
        "chain:write:prompt:update",
        {"id": payload["id"], "version": payload["version"], "changes": {"body": payload["body"]}},
    )


chain.job("apply-suggestion", on="chain:write:suggest")(_apply)
chain.job(
    "apply-reviewed",
    on="chain:write:suggest-reviewed",
    acts_for_system="applies suggestions a reviewer queue accepted",
)(_apply)


memo = Entity(table="echo_memos", fields={"title": _text()})
echo = Feature("echo")
echo.crud("memo", memo, write=ADMIN, read=ADMIN, descriptions={"create": "Create a memo."})


@echo.consumer("forget-memo", on=["echo:event:memo.created"], max_attempts=1)
def forget_memo(event: StoredEvent, ctx: ConsumerContext) -> None:
    ctx.entity("memo").forget(event.stream_id)


scrap = Entity(table="sweep_scraps", fields={"title": _text()})
sweep = Feature("sweep")
sweep.crud("scrap", scrap, write=ADMIN, read=ADMIN, descriptions={"create": "Create a scrap."})


@sweep.consumer(
    "forget-scrap",
    on=["sweep:event:scrap.created"],
    max_attempts=1,
    acts_for_system="scraps are temporary: the sweep forgets each one, whoever made it",
)
def forget_scrap(event: StoredEvent, ctx: ConsumerContext) -> None:
    ctx.entity("scrap").forget(event.stream_id)
