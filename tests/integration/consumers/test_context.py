"""``ConsumerContext``: writes, queries and job enqueues inside the pass's transaction, as the
tenant's system user, with no entry handler of its own."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from sqlalchemy import select

from asanoha import Access, Agent
from asanoha.platform.consumers import ConsumerContext
from asanoha.platform.store import StoredEvent
from tests.integration.consumers.conftest import TENANT, append, ledger

SYSTEM = Access(roles=["system"])


class Note(BaseModel):
    note: str


def _feature_with(handler: Any) -> Any:
    feature = ledger(handler)

    @feature.write_handler("record", access=SYSTEM, agent=Agent(risk="low"))
    def record(payload: Note, ctx: Any) -> dict[str, Any]:
        return {
            "entry": ctx.request.entry.qn if ctx.request.entry else None,
            "user": ctx.user.id,
            "row": ctx.entity("entry").create({"note": payload.note})["id"],
        }

    @feature.query_handler("count", access=SYSTEM)
    def count(payload: Note, ctx: Any) -> int:
        return len(ctx.entity("entry").list()["rows"])

    @feature.job("follow-up", manual=True)
    def follow_up(payload: dict[str, Any], ctx: Any) -> None:
        return None

    return feature


def test_write_query_and_dispatch_share_the_pass_transaction(consumer_stack):
    seen: list[Any] = []

    def handler(event: StoredEvent, ctx: ConsumerContext) -> None:
        result = ctx.write("ledger:write:record", {"note": f"event {event.id}"})
        # The query reads the write above: same transaction, not yet committed.
        visible = ctx.query_as(ctx.system_user, "ledger:query:count", {"note": "-"})
        job = ctx.dispatch("ledger:job:follow-up", {"event": event.id})
        seen.append((result["entry"], result["user"], visible, job))

    stack = consumer_stack([_feature_with(handler)])
    append(stack, "s")
    stack.consumers.run_once()
    [(entry, user, visible, job)] = seen
    # The written handler became the entry handler (the consumer itself has none).
    assert (entry, user, visible) == ("ledger:write:record", "system", 1)
    outbox = stack.tables.outbox
    with stack.db.connect() as conn:
        rows = conn.execute(select(outbox.c.id, outbox.c.job_qn, outbox.c.headers)).all()
    assert [(r.id, r.job_qn) for r in rows] == [(job, "ledger:job:follow-up")]
    assert rows[0].headers["tenant_id"] == TENANT
    assert rows[0].headers["trigger_name"] == "ledger:consumer:follow"


def test_a_failing_delivery_rolls_back_its_writes_and_job_enqueues(consumer_stack):
    attempts: list[int] = []

    def handler(event: StoredEvent, ctx: ConsumerContext) -> None:
        attempts.append(event.id)
        ctx.write("ledger:write:record", {"note": "x"})
        ctx.dispatch("ledger:job:follow-up", {})
        raise RuntimeError("after the writes")

    stack = consumer_stack([_feature_with(handler)])
    append(stack, "s")
    before = stack.row_counts()
    stack.consumers.run_once()
    assert attempts and stack.row_counts() == before
