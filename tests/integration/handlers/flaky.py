"""A feature whose job fails until its switch is flipped: the failed job a retry runs again."""

from __future__ import annotations

from typing import Any

from asanoha import Access, Entity, Feature, JobContext, fields

NOTE_CREATE = "flaky:write:note:create"
SEND = "flaky:job:send"


class Switch:
    """Whether the job fails, and the attempts it saw (with their tenant and origin)."""

    def __init__(self) -> None:
        self.failing = True
        self.seen: list[tuple[int, str, str | None, str | None]] = []

    def run(self, payload: dict[str, Any], ctx: JobContext) -> None:
        self.seen.append((ctx.attempt, ctx.tenant_id, ctx.triggered_by, ctx.meta.origin.root_qn))
        if self.failing:
            raise ConnectionError(f"the mail server did not answer for {payload['text']}")


def flaky_feature(switch: Switch, *, retries: int = 1) -> Feature:
    """Notes whose create triggers ``flaky:job:send``, which fails while ``switch.failing``."""
    note = Entity(
        table="flaky_notes", fields={"text": fields.text(personal=False, reason="fixture")}
    )
    feature = Feature("flaky")
    feature.crud("note", note, write=Access(roles=["Admin"]), read=Access(roles=["Admin"]))
    feature.job("send", on=NOTE_CREATE, retries=retries)(switch.run)
    return feature
