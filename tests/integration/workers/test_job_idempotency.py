"""``JobContext.write(..., idempotency_key=...)``: a retried attempt gets the first attempt's
outcome instead of writing again."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from asanoha import Access, Entity, Feature, WriteContext, fields
from asanoha.platform.model import Backoff


class Note(BaseModel):
    text: str


def _feature(answers: list[Any]) -> Feature:
    feature = Feature("jobkeys")
    feature.entity(
        "note",
        Entity(
            table="jobkeys_notes", fields={"text": fields.text(personal=False, reason="fixture")}
        ),
    )

    @feature.write_handler("add-note", access=Access(roles=["system"]))
    def add_note(payload: Note, ctx: WriteContext) -> Any:
        return ctx.entity("note").create({"text": payload.text})

    @feature.job("remember", manual=True, retries=1, backoff=Backoff.fixed(0.01))
    def remember(payload: dict[str, Any], ctx: Any) -> None:
        row = ctx.write(
            "jobkeys:write:add-note", {"text": "once"}, idempotency_key=f"remember-{ctx.task_id}"
        )
        answers.append(str(row["id"]))
        if ctx.attempt == 1:
            raise RuntimeError("the first attempt fails after its write")

    return feature


def test_a_retried_attempt_answers_the_first_attempts_write(jobs_stack: Any) -> None:
    answers: list[Any] = []
    stack = jobs_stack([_feature(answers)])
    stack.dispatch_job("jobkeys:job:remember", {})
    summary = stack.drain()
    assert (summary.succeeded, summary.retried) == (1, 1)
    assert len(answers) == 2 and answers[0] == answers[1]
    assert stack.row_counts()["jobkeys:note"] == 1
