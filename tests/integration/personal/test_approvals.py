"""The approval of an agent's call keeps its summary without the personal values in it."""

from __future__ import annotations

from typing import Any

import pytest

from asanoha import Feature, WriteContext
from asanoha.platform.errors import DefinitionError
from asanoha.testing import TestUsers
from tests.integration.personal.features import ADMIN, Invite
from tests.integration.personal.scan import hits
from tests.integration.personal.test_forget import ALICE


def approve(stack: Any, handler: str, payload: dict[str, Any]) -> tuple[str, str]:
    """An admin's approval of the assistant's call: the summary the human saw, and the one
    the approvals table keeps."""
    approval = stack.http.write_ok(
        "agent:write:approve",
        {"handler": handler, "payload": payload, "principal": "assistant", "channel": "test"},
        TestUsers.admin,
    )
    with stack.db.connect() as conn:
        stored = conn.execute(stack.tables.agent_approvals.select()).one().summary
    return approval["summary"], stored


def test_a_stored_approval_summary_holds_no_personal_value(stack: Any) -> None:
    payload = {"email": ALICE["email"], "name": ALICE["name"], "plan": "gold"}
    shown, stored = approve(stack, "personal:write:customer:create", payload)
    # The human asked saw the values; the approvals table keeps the summary without them.
    assert ALICE["email"] in shown
    assert hits(stack, [ALICE["email"], ALICE["name"]]) == []
    assert "[personal]" in stored and "gold" in stored


def test_a_custom_handler_names_the_personal_fields_of_its_payload(stack: Any) -> None:
    payload = {"email": ALICE["email"], "plan": "gold"}
    shown, stored = approve(stack, "personal:write:invite", payload)
    assert ALICE["email"] in shown
    assert hits(stack, [ALICE["email"]]) == []
    assert "[personal]" in stored and "gold" in stored


def test_personal_names_a_field_of_the_payload() -> None:
    feature = Feature("invites")
    with pytest.raises(DefinitionError, match=r"invites:write:invite: personal= names 'mail'"):

        @feature.write_handler("invite", access=ADMIN, personal=["mail"])
        def invite(payload: Invite, ctx: WriteContext) -> None: ...

    with pytest.raises(DefinitionError, match="personal= takes a list of payload field names"):
        feature.write_handler("invite", access=ADMIN, personal="email")
