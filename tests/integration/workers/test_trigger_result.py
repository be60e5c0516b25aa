"""The handler's result stored for its write-triggered jobs (``ctx.trigger.result``): made
storable in the write's transaction, never a reason for the write to fail or half commit."""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

import pytest
from pydantic import BaseModel
from sqlalchemy import func, select

from asanoha.platform.model import Access, Entity, Feature, SessionUser, fields
from asanoha.platform.service.trigger_result import MAX_TRIGGER_RESULT_BYTES
from asanoha.workers import JobFailedError
from tests.integration.workers.conftest import job_rows

ADMIN = SessionUser.of("admin-1", "default", ["Admin"])


class Shape(BaseModel):
    shape: str


class Opaque:
    def __str__(self) -> str:
        return "an opaque value"


def _result_of(shape: str) -> Any:
    if shape == "odd":
        return {
            "text": "before\x00after",
            "lone": "half \ud800 a pair",
            "key\x00": 1,
            "amount": decimal.Decimal("1.50"),
            "when": dt.date(2026, 12, 1),
            "nan": float("nan"),
            "opaque": Opaque(),
            "nested": [{"deep": "\x00"}],
        }
    if shape == "huge":
        return {"blob": "x" * (MAX_TRIGGER_RESULT_BYTES + 1)}
    circular: list[Any] = []
    circular.append(circular)
    return circular


def _feature(seen: list[Any]) -> Feature:
    feature = Feature("results")
    feature.crud(
        "note",
        Entity(table="result_notes", fields={"shape": fields.text(personal=False, reason="test")}),
        write=Access(roles=["Admin"]),
        read=Access(roles=["Admin"]),
    )

    @feature.write_handler("make", access=Access(roles=["Admin"]))
    def make(payload: Shape, ctx: Any) -> Any:
        ctx.entity("note").create({"shape": payload.shape})
        return _result_of(payload.shape)

    @feature.job("reads-result", on="results:write:make")
    def reads_result(payload: dict[str, Any], ctx: Any) -> None:
        seen.append(("reads", ctx.trigger.result))

    @feature.job("ignores-result", on="results:write:make")
    def ignores_result(payload: dict[str, Any], ctx: Any) -> None:
        seen.append(("ignores", payload["shape"]))

    return feature


def _events(stack: Any) -> int:
    """The write's events (each job row's ends are events of its own stream)."""
    events = stack.tables.events
    with stack.db.connect() as conn:
        return int(
            conn.execute(select(func.count()).where(events.c.stream_type != "asanoha:job")).scalar()
        )


@pytest.mark.parametrize("database", ["postgres", "sqlite"])
def test_unstorable_text_and_non_json_values_reach_the_job_escaped_and_as_json(
    asanoha_stack, database
):
    seen: list[Any] = []
    stack = asanoha_stack(features=[_feature(seen)], jobs=True, database=database)
    result = stack.service.dispatch_write("results:write:make", {"shape": "odd"}, ADMIN)
    # The caller gets the handler's result as it was.
    assert result["text"] == "before\x00after"
    stack.drain()
    assert _events(stack) == 1
    assert ("ignores", "odd") in seen
    (stored,) = [value for kind, value in seen if kind == "reads"]
    assert stored == {
        "text": "before\\u0000after",
        "lone": "half \\ud800 a pair",
        "key\\u0000": 1,
        "amount": "1.50",
        "when": "2026-12-01",
        "nan": None,
        "opaque": "an opaque value",
        "nested": [{"deep": "\\u0000"}],
    }


@pytest.mark.parametrize("shape", ["huge", "circular"])
@pytest.mark.parametrize("database", ["postgres", "sqlite"])
def test_a_result_that_cannot_be_stored_commits_the_write_and_fails_only_the_job_reading_it(
    asanoha_stack, database, shape
):
    seen: list[Any] = []
    stack = asanoha_stack(features=[_feature(seen)], jobs=True, database=database)
    stack.service.dispatch_write("results:write:make", {"shape": shape}, ADMIN)
    with pytest.raises(JobFailedError) as raised:
        stack.drain()
    (failure,) = raised.value.failures
    assert failure.job_qn == "results:job:reads-result"
    assert "TriggerResultUnavailable: the result of results:write:make was not stored" in (
        failure.error
    )
    assert ("bytes of JSON" if shape == "huge" else "cannot be turned into JSON") in failure.error
    # The write committed whole: its event, its entity row and both job rows.
    assert _events(stack) == 1
    assert seen == [("ignores", shape)]
    assert sorted(row.state for row in job_rows(stack)) == ["failed", "succeeded"]
    assert all(row.trigger_result is None for row in job_rows(stack))
