"""A feature for the console tests: a note's create triggers a job that logs a line and fails
while its switch says so, and a consumer of the notes that fails on a poisoned text."""

from __future__ import annotations

from typing import Any

from asanoha import Access, Entity, Feature, JobContext, fields
from asanoha.platform.consumers import ConsumerContext
from asanoha.platform.store import StoredEvent

NOTE_CREATE = "console:write:note:create"
SEND = "console:job:send"
FOLLOW = "console:consumer:follow"


class Switch:
    """Whether the job fails, and whether the consumer fails on a poisoned note."""

    def __init__(self) -> None:
        self.failing = True
        self.poisoned = True


def console_feature(switch: Switch) -> Feature:
    """Notes (Admin writes them), the ``send`` job they trigger and the ``follow`` consumer."""
    note = Entity(
        table="console_notes", fields={"text": fields.text(personal=False, reason="fixture")}
    )
    feature = Feature("console")
    feature.crud("note", note, write=Access(roles=["Admin"]), read=Access(roles=["Admin"]))

    def send(payload: dict[str, Any], ctx: JobContext) -> None:
        ctx.log.info("sending note %s to the mail server", payload.get("id", "?"))
        if switch.failing:
            raise ConnectionError("the mail server did not answer")

    feature.job("send", on=NOTE_CREATE, retries=0)(send)

    def follow(event: StoredEvent, ctx: ConsumerContext) -> None:
        if switch.poisoned and "poison" in str(event.payload):
            raise ValueError("cannot follow a poisoned note")

    feature.consumer("follow", on=["console:event:note.created"], max_attempts=1)(follow)
    return feature
