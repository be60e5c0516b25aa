"""Fixture features of the bad-input suite: a custom handler whose payload a job receives,
handlers that lock two rows in opposite orders, and an entity reached by its camelCase name."""

from __future__ import annotations

import threading
import uuid
from typing import Any

from pydantic import BaseModel

from asanoha import Access, Entity, Feature, JobContext, QueryContext, WriteContext, fields

ADMIN = Access(roles=["Admin"])

intake = Feature("intake")


class Message(BaseModel):
    text: str
    tags: dict[str, Any] = {}


@intake.write_handler("submit", access=ADMIN)
def submit(payload: Message, ctx: WriteContext) -> Any:
    return {"received": len(payload.text)}


@intake.job("forward", on="intake:write:submit")
def forward(payload: dict[str, Any], ctx: JobContext) -> None: ...


counter = Entity(
    table="intake_counters",
    fields={"label": fields.text(personal=False, reason="fixture"), "hits": fields.integer()},
)
intake.crud("promptNote", counter, write=ADMIN, read=ADMIN)


class Pair(BaseModel):
    first: uuid.UUID
    second: uuid.UUID


#: Both callers hold their first row before either asks for its second: a deadlock.
both_hold_one = threading.Barrier(2, timeout=30)


@intake.write_handler("bump-pair", access=ADMIN)
def bump_pair(payload: Pair, ctx: WriteContext) -> Any:
    notes = ctx.entity("promptNote")
    notes.update(payload.first, {"hits": 1}, skip_optimistic_lock=True)
    both_hold_one.wait()
    return notes.update(payload.second, {"hits": 2}, skip_optimistic_lock=True)


class Nothing(BaseModel):
    pass


@intake.query_handler("count-notes", access=ADMIN)
def count_notes(payload: Nothing, ctx: QueryContext) -> Any:
    # camelCase, snake_case and kebab-case all name the entity registered as "promptNote".
    names = ("promptNote", "prompt_note", "prompt-note", "intake:promptNote")
    return {name: len(ctx.entity(name).list()["rows"]) for name in names}
