"""Transition maps are checked when the entity is declared."""

from __future__ import annotations

from typing import Any

import pytest

from asanoha import Access, DefinitionError, Entity, Feature, WriteContext, fields

STATUS = fields.select(("draft", "review", "published"))


def entity(transitions: Any, **extra: Any) -> Entity:
    return Entity(
        table="articles",
        fields={"status": STATUS, "count": fields.integer(), **extra},
        transitions=transitions,
    )


def test_a_map_over_a_select_field_is_frozen() -> None:
    declared = entity({"status": {"draft": ["review"], "review": ["draft", "published"]}})
    assert declared.transitions == {
        "status": {"draft": ("review",), "review": ("draft", "published")}
    }


def test_a_map_over_a_text_field_takes_any_states() -> None:
    text = fields.text(personal=False, reason="states")
    declared = entity({"phase": {"a": ["b"]}}, phase=text)
    assert declared.transitions == {"phase": {"a": ("b",)}}


@pytest.mark.parametrize(
    ("transitions", "message"),
    [
        ({"status": {"draft": ["gone"]}}, r"'articles'.*\['gone'\].*not among its choices"),
        ({"status": {"lost": ["draft"]}}, r"'articles'.*\['lost'\]"),
        ({"count": {"1": ["2"]}}, r"'articles'.*'count' need a select or text field, not integer"),
        ({"missing": {"a": ["b"]}}, r"'articles'.*unknown field 'missing'"),
        ({"status": {"draft": "review"}}, r"'articles'.*must be a text mapped to a list"),
        ({"status": {}}, r"'articles'.*map each state"),
        (["status"], r"'articles'.*transitions= maps field names"),
    ],
)
def test_a_wrong_map_is_a_definition_error_naming_the_entity(
    transitions: Any, message: str
) -> None:
    with pytest.raises(DefinitionError, match=message):
        entity(transitions)


@pytest.mark.parametrize("reason", ["", "  "])
def test_skipping_the_guard_needs_a_reason(reason: str) -> None:
    feature = Feature("repairs")
    with pytest.raises(DefinitionError, match="skip_transition_guard= needs a non-blank reason"):

        @feature.write_handler("fix", access=Access(roles=["Admin"]), skip_transition_guard=reason)
        def fix(payload: Any, ctx: WriteContext) -> None: ...
