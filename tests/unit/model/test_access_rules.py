"""Owner rules and field access rules: what a definition may declare, refused when it is made
with a message naming the entity or handler and the fix."""

from __future__ import annotations

from typing import Any

import pytest

from asanoha import Access, Entity, Feature, fields
from asanoha.platform.errors import DefinitionError
from asanoha.platform.model import SessionUser

STAFF = Access(roles=["Staff"])
note = Entity(
    table="notes",
    fields={
        "title": fields.text(personal=False, reason="test"),
        "holder": fields.text(personal=False, reason="the owner's user id"),
        "parent": fields.reference("shop:note"),
        "count": fields.integer(),
    },
)


def _crud(owner: Any) -> None:
    Feature("shop").crud("note", note, write=STAFF, read=Access(roles=["Staff"], owner=owner))


@pytest.mark.parametrize("owner", ["created_by", "holder", "parent", lambda row, user: True])
def test_an_owner_is_created_by_a_text_or_reference_field_or_a_function(owner: Any) -> None:
    _crud(owner)


def test_an_owner_field_the_entity_lacks_names_the_handler_and_the_fields() -> None:
    with pytest.raises(DefinitionError, match=r"shop:query:note:list: Access\(owner='author'\)"):
        _crud("author")


def test_an_owner_field_that_holds_no_user_id_is_refused() -> None:
    with pytest.raises(DefinitionError, match="names a field of kind integer"):
        _crud("count")


def test_an_owner_function_needs_the_row_and_the_user() -> None:
    with pytest.raises(DefinitionError, match=r"owner\(row, user\)"):
        _crud(lambda row: True)


def test_owner_on_a_custom_handler_is_refused_naming_ctx_entity() -> None:
    feature = Feature("shop")
    with pytest.raises(DefinitionError, match=r"shop:write:rename: .*ctx\.entity"):
        feature.write_handler("rename", access=Access(roles=["Staff"], owner="created_by"))


def test_bypass_roles_without_an_owner_and_a_blank_owner_are_refused() -> None:
    with pytest.raises(DefinitionError, match="bypasses nothing"):
        Access(roles=["Staff"], bypass_roles=["Admin"])
    with pytest.raises(DefinitionError, match="owner="):
        Access(roles=["Staff"], owner=" ")
    with pytest.raises(DefinitionError, match=r"Access\(bypass_roles=\['Admin'\]\)"):
        Access(roles=["Staff"], owner="created_by", bypass_roles="Admin")


def test_every_field_kind_takes_read_and_write_rules() -> None:
    hr = Access(roles=["HR"])
    declared = [
        fields.text(personal=False, reason="t", read=hr, write=hr),
        fields.long_text(personal=False, reason="t", read=hr, write=hr),
        fields.json(read=hr, write=hr),
        fields.integer(read=hr, write=hr),
        fields.number(read=hr, write=hr),
        fields.decimal(read=hr, write=hr),
        fields.boolean(read=hr, write=hr),
        fields.timestamp(read=hr, write=hr),
        fields.date(read=hr, write=hr),
        fields.select(["a"], read=hr, write=hr),
        fields.reference("shop:note", read=hr, write=hr),
    ]
    entity = Entity(table="kinds", fields={f"f{i}": f for i, f in enumerate(declared)})
    assert all(f.read == hr and f.write == hr for f in entity.fields.values())
    assert hr.admits(SessionUser.of("u", "t", ["HR"]))


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        (Access(roles=["HR"], owner="created_by"), r"read=Access\(owner=...\) is not served"),
        ("HR", r"read= must be an Access"),
        (Access(open_to_all=" "), "needs a non-blank reason"),
    ],
)
def test_a_field_rule_that_cannot_serve_names_the_field(rule: Any, message: str) -> None:
    with pytest.raises(DefinitionError, match=rf"field 'pay' of entity 'pays'.*{message}"):
        Entity(table="pays", fields={"pay": fields.integer(read=rule)})
