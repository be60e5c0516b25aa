"""Through the MCP surface, a forgotten subject's personal values read as ``[forgotten]``;
the other subjects' values read as they were written."""

from __future__ import annotations

import uuid
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from asanoha import Access, Agent, Entity, Feature, WriteContext, fields
from asanoha.platform.personal import FORGOTTEN_TEXT
from asanoha.testing import TestUsers
from asanoha.testing.plugin import StackFactory
from asanoha.testing.serving import serve_in_thread
from tests.integration.agents.scenario import data_of
from tests.integration.agents.test_mcp_http import mcp_session
from tests.integration.personal.test_forget import ALICE, BOB

ADMIN = TestUsers.admin
ADMINS = Access(roles=["Admin"])

member = Entity(
    table="pmcp_members",
    fields={
        "email": fields.text(personal="self"),
        "name": fields.text(personal="self"),
        "born": fields.date(personal="self"),
        "plan": fields.text(personal=False, reason="a product name"),
    },
)
note = Entity(
    table="pmcp_notes",
    fields={
        "member": fields.reference("pmcp:member"),
        "address": fields.long_text(personal={"of": "member"}),
        "topic": fields.text(personal=False, reason="a product name"),
    },
)
members = Feature("pmcp")
# Described: the lists and the details are tools.
members.crud(
    "member",
    member,
    write=ADMINS,
    read=ADMINS,
    descriptions={"list": "The members.", "detail": "One member."},
)
members.crud(
    "note",
    note,
    write=ADMINS,
    read=ADMINS,
    descriptions={"list": "The notes.", "detail": "One note about a member."},
)


class RowId(BaseModel):
    id: uuid.UUID


@members.write_handler("forget-member", access=ADMINS, agent=Agent(risk="high"))
def forget_member(payload: RowId, ctx: WriteContext) -> Any:
    return ctx.entity("member").forget(payload.id)


def create(stack: Any, person: dict[str, str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A member and a note about them."""
    row: dict[str, Any] = stack.http.write_ok(
        "pmcp:write:member:create",
        {"email": person["email"], "name": person["name"], "born": person["born"], "plan": "p"},
        ADMIN,
    )
    about: dict[str, Any] = stack.http.write_ok(
        "pmcp:write:note:create",
        {"member": row["id"], "address": person["address"], "topic": "tea"},
        ADMIN,
    )
    return row, about


@pytest.mark.parametrize("database", ["postgres", "sqlite"])
def test_a_tool_reads_a_forgotten_subject_as_forgotten(
    asanoha_stack: StackFactory, database: str
) -> None:
    stack = asanoha_stack(features=[members], database=database)
    (alice, alice_note), (bob, bob_note) = create(stack, ALICE), create(stack, BOB)
    stack.http.write_ok("pmcp:write:forget-member", {"id": alice["id"]}, ADMIN)

    async def scenario(base_url: str) -> list[Any]:
        async with mcp_session(f"{base_url}/mcp", stack, ADMIN) as session:
            calls = [
                ("pmcp:query:note:detail", {"id": alice_note["id"]}),
                ("pmcp:query:note:detail", {"id": bob_note["id"]}),
                ("pmcp:query:note:list", {}),
                ("pmcp:query:member:detail", {"id": bob["id"]}),
            ]
            return [data_of(await session.call_tool(name, args)) for name, args in calls]

    with serve_in_thread(stack.app.build_http()) as base_url:
        forgotten, kept, notes, member = anyio.run(scenario, base_url)

    # The forgotten subject's value, in a row about them: the sentinel; the rest as it was.
    assert (forgotten["id"], forgotten["address"], forgotten["topic"]) == (
        alice_note["id"],
        FORGOTTEN_TEXT,
        "tea",
    )
    assert kept["address"] == BOB["address"]
    addresses = {row["id"]: row["address"] for row in notes["rows"]}
    assert addresses == {alice_note["id"]: FORGOTTEN_TEXT, bob_note["id"]: BOB["address"]}
    assert (member["email"], member["name"], member["born"]) == (
        BOB["email"],
        BOB["name"],
        BOB["born"],
    )
