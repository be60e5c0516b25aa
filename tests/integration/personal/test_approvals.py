"""The approval of an agent's call keeps its summary without the personal values in it."""

from __future__ import annotations

from typing import Any

from asanoha.testing import TestUsers
from tests.integration.personal.scan import hits
from tests.integration.personal.test_forget import ALICE


def test_a_stored_approval_summary_holds_no_personal_value(stack: Any) -> None:
    payload = {"email": ALICE["email"], "name": ALICE["name"], "plan": "gold"}
    approval = stack.http.write_ok(
        "agent:write:approve",
        {
            "handler": "personal:write:customer:create",
            "payload": payload,
            "principal": "assistant",
            "channel": "test",
        },
        TestUsers.admin,
    )
    # The human asked saw the values; the approvals table keeps the summary without them.
    assert ALICE["email"] in approval["summary"]
    assert hits(stack, [ALICE["email"], ALICE["name"]]) == []
    approvals = stack.tables.agent_approvals
    with stack.db.connect() as conn:
        stored = conn.execute(approvals.select()).one().summary
    assert "[personal]" in stored and "gold" in stored
