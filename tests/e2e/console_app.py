"""The application of the console test (settings from ``ASANOHA_*``): a note's create
triggers a job that logs a line and fails while the file ``DESK_FAIL_FLAG`` names exists, and a
consumer of the notes fails on a poisoned note while ``DESK_POISON_FLAG`` exists."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from asanoha.app import App
from asanoha.handlers import consumer_admin, job_admin
from asanoha.platform.consumers import ConsumerContext
from asanoha.platform.model import Access, Entity, Feature, fields
from asanoha.platform.store import StoredEvent

feature = Feature("desk")
feature.crud(
    "note",
    Entity(table="desk_notes", fields={"text": fields.text(personal=False, reason="fixture")}),
    write=Access(roles=["Admin"]),
    read=Access(roles=["Admin"]),
)


def _flag(name: str) -> bool:
    path = os.environ.get(name)
    return bool(path) and Path(str(path)).exists()


@feature.job("send", on="desk:write:note:create", timeout=20)
def send(payload: dict[str, Any], ctx: Any) -> None:
    """Logs a line, then fails while the fail flag is set."""
    ctx.log.info("sending note %s to the mail server", payload.get("text", "?"))
    if _flag("DESK_FAIL_FLAG"):
        raise ConnectionError("the mail server did not answer")


@feature.consumer("follow", on=["desk:event:note.created"], max_attempts=1)
def follow(event: StoredEvent, ctx: ConsumerContext) -> None:
    """Fails on a poisoned note while the poison flag is set."""
    if _flag("DESK_POISON_FLAG") and "poison" in str(event.payload):
        raise ValueError("cannot follow a poisoned note")


app = App([feature, job_admin.feature, consumer_admin.feature])
