"""Tool annotations derive from the resolved risk; contradictory declared hints are refused."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from asanoha import Access, Agent, Entity, Feature, fields
from asanoha.platform.errors import DefinitionError
from asanoha.platform.model.agent_hints import derive_tool_hints

ADMIN = Access(roles=["Admin"])


class Empty(BaseModel):
    pass


def query(feature: Feature, agent: Agent) -> None:
    @feature.query_handler("look", access=ADMIN, agent=agent, description="Look.")
    def look(payload: Empty, ctx: Any) -> None:
        return None


def write(feature: Feature, agent: Agent) -> None:
    @feature.write_handler("wipe", access=ADMIN, agent=agent, description="Wipe.")
    def wipe(payload: Empty, ctx: Any) -> None:
        return None


def test_a_query_declared_destructive_is_refused_naming_the_handler() -> None:
    with pytest.raises(DefinitionError, match=r"f:query:look declares Agent\(destructive=True\)"):
        query(Feature("f"), Agent(destructive=True))


def test_a_query_declared_not_read_only_is_refused() -> None:
    with pytest.raises(DefinitionError, match=r"f:query:look .*it is a query"):
        query(Feature("f"), Agent(read_only=False))


def test_a_high_risk_write_declared_read_only_is_refused() -> None:
    with pytest.raises(DefinitionError, match=r"f:write:wipe declares Agent\(read_only=True\)"):
        write(Feature("f"), Agent(risk="high", read_only=True))


def test_a_high_risk_write_declared_not_destructive_is_refused() -> None:
    with pytest.raises(DefinitionError, match=r"f:write:wipe declares Agent\(destructive=False\)"):
        write(Feature("f"), Agent(risk="high", destructive=False))


def test_a_custom_write_declared_idempotent_is_refused() -> None:
    with pytest.raises(DefinitionError, match=r"f:write:wipe .*cannot promise"):
        write(Feature("f"), Agent(idempotent=True))


def test_a_hard_delete_that_reaches_an_irreversible_operation_declared_read_only_is_refused() -> (
    None
):
    hard = Entity(table="logs", fields={"n": fields.integer()})
    with pytest.raises(
        DefinitionError, match=r"f:write:log:delete declares Agent\(read_only=True\)"
    ):
        Feature("f").crud(
            "log", hard, write=ADMIN, read=ADMIN, agent={"delete": Agent(read_only=True)}
        )


def test_a_hard_delete_declared_low_is_refused_naming_the_handler() -> None:
    hard = Entity(table="logs", fields={"n": fields.integer()})
    with pytest.raises(DefinitionError, match=r"f:write:log:delete declares Agent\(risk='low'\)"):
        Feature("f").crud("log", hard, write=ADMIN, read=ADMIN, agent={"delete": Agent(risk="low")})


def test_hints_that_agree_are_accepted_and_annotations_follow_the_risk() -> None:
    feature = Feature("f")
    query(feature, Agent(read_only=True))
    write(feature, Agent(risk="high", destructive=True, read_only=False))
    look, wipe = feature.handlers
    assert derive_tool_hints(look).annotations("t") == {"title": "t", "readOnlyHint": True}
    assert derive_tool_hints(wipe).annotations("t") == {
        "title": "t",
        "readOnlyHint": False,
        "destructiveHint": True,
    }
    assert derive_tool_hints(wipe).meta() == {
        "asanoha.dev/agent": {"risk": "high", "approval": "approval required"}
    }


def test_standard_update_and_delete_are_idempotent_create_is_not() -> None:
    feature = Feature("f")
    soft = Entity(table="notes", soft_delete=True, fields={"n": fields.integer()})
    feature.crud("note", soft, write=ADMIN, read=ADMIN)
    hints = {handler.qn: derive_tool_hints(handler) for handler in feature.handlers}
    assert hints["f:write:note:update"].annotations("t")["idempotentHint"] is True
    assert hints["f:write:note:delete"].annotations("t")["idempotentHint"] is True
    assert "idempotentHint" not in hints["f:write:note:create"].annotations("t")
    assert hints["f:write:note:create"].annotations("t")["destructiveHint"] is False


class Moves(BaseModel):
    source: str
    target: str


def test_targets_name_payload_fields_of_a_write() -> None:
    feature = Feature("f")

    @feature.write_handler(
        "move", access=ADMIN, agent=Agent(risk="high", targets=["source", "target"])
    )
    def move(payload: Moves, ctx: Any) -> None:
        return None

    (handler,) = feature.handlers
    assert handler.agent is not None
    assert handler.agent.target_fields == ("source", "target")
    assert Agent().target_fields == ("id",)
    assert Agent(targets="source").target_fields == ("source",)


def test_targets_naming_no_payload_field_are_refused_naming_the_handler() -> None:
    feature = Feature("f")
    with pytest.raises(
        DefinitionError, match=r"f:write:move declares Agent\(targets=.*no field id"
    ):

        @feature.write_handler("move", access=ADMIN, agent=Agent(risk="high", targets=["id"]))
        def move(payload: Moves, ctx: Any) -> None:
            return None


def test_targets_on_a_query_are_refused() -> None:
    with pytest.raises(DefinitionError, match=r"f:query:look declares Agent\(targets=...\)"):
        query(Feature("f"), Agent(targets=()))
