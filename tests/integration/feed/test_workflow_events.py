"""A workflow run's transitions on the feed: started, each step that succeeded, and its end,
in order, reach the user who started the run and the tenant's operators, no one else."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from asanoha import StepContext, WorkflowFailedError
from asanoha.platform.model import Feature
from asanoha.testing import Stack, TestUsers
from tests.integration.feed.conftest import Served, serve
from tests.integration.feed.sse_client import open_stream

ADMIN, USER, OPERATOR = TestUsers.admin, TestUsers.user, TestUsers.system_admin
RUNS = {"types": "asanoha:workflow.*"}
REVIEW = "desk:workflow:review"


def _desk() -> Feature:
    desk = Feature("desk")
    review = desk.workflow("review", manual=True)

    @review.step("draft")
    def draft(payload: dict[str, Any], ctx: StepContext) -> str:
        if payload.get("broken"):
            raise RuntimeError("no draft")
        return "drafted"

    review.approval("sign-off", after="draft")

    @review.step("publish", after="sign-off")
    def publish(payload: dict[str, Any], ctx: StepContext) -> str:
        return "published"

    return desk


@pytest.fixture
def served_desk(asanoha_stack: Callable[..., Any]) -> Iterator[Served]:
    stack: Stack = asanoha_stack(features=[_desk()], jobs=True)
    yield from serve(stack)


def test_a_runs_transitions_reach_its_starter_and_the_operators(served_desk: Served) -> None:
    served, stack = served_desk, served_desk.stack
    with (
        open_stream(served.base_url, served.token(ADMIN), RUNS) as admin,
        open_stream(served.base_url, served.token(USER), RUNS) as user,
        open_stream(served.base_url, served.token(OPERATOR), RUNS) as operator,
    ):
        for stream in (admin, user, operator):
            stream.read_until(lambda s: b"retry:" in s.raw)
        run_id = stack.app.workflows.start(REVIEW, {}, ADMIN)
        stack.drain()
        stack.app.workflows.approve(run_id, "sign-off", OPERATOR)
        stack.drain()
        failed_id = stack.app.workflows.start(REVIEW, {"broken": True}, USER)
        with pytest.raises(WorkflowFailedError):
            stack.drain()
        admin.read_until(lambda s: len(s.events) == 5)
        operator.read_until(lambda s: len(s.events) == 7)
        user.read_until(lambda s: len(s.events) == 2)
    assert [(m.json["type"], m.json["payload"].get("step")) for m in admin.events] == [
        ("asanoha:workflow.started", None),
        ("asanoha:workflow.step", "draft"),
        ("asanoha:workflow.step", "sign-off"),
        ("asanoha:workflow.step", "publish"),
        ("asanoha:workflow.succeeded", None),
    ]
    assert {m.json["streamId"] for m in admin.events} == {str(run_id)}
    assert [m.json["version"] for m in admin.events] == [1, 2, 3, 4, 5]
    # The other user's stream passed the admin's run without showing any of it.
    assert str(run_id).encode() not in bytes(user.raw)
    started, failed = [m.json for m in user.events]
    assert (started["type"], started["streamId"]) == ("asanoha:workflow.started", str(failed_id))
    assert failed["type"] == "asanoha:workflow.failed"
    assert failed["payload"] == {
        "workflow": REVIEW,
        "state": "failed",
        "step": "draft",
        "item": 0,
        "error": failed["payload"]["error"],
    }
    assert "no draft" in failed["payload"]["error"]
    assert {m.json["streamId"] for m in operator.events} == {str(run_id), str(failed_id)}
