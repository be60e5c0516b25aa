"""The owner rule, without a database: who owns a row, what a confined create fills in."""

from __future__ import annotations

import uuid

from sqlalchemy import Column, MetaData, String, Table, select

from asanoha import Access, Entity, Feature, Registry, fields
from asanoha.platform.model import SessionUser
from asanoha.platform.service.ownership import (
    OwnerRule,
    OwnerRules,
    owned,
    owned_rows,
    owner_default,
)

ALICE = SessionUser.of("alice", "t", ["Staff"])
ANONYMOUS = SessionUser.anonymous("t")
BY_CREATOR = OwnerRule("created_by", frozenset({"Auditor"}))
BY_HOLDER = OwnerRule("holder", frozenset())
BY_CARD = OwnerRule("card", frozenset())

feature = Feature("shop")
entity_def = feature.crud(
    "ticket",
    Entity(
        table="tickets",
        fields={
            "holder": fields.text(personal=False, reason="the owner's user id"),
            "card": fields.reference("shop:ticket"),
        },
    ),
    write=Access(roles=["Staff"], owner="holder", bypass_roles=["Auditor"]),
    read=Access(roles=["Staff"]),
)


def test_a_row_is_owned_by_the_user_its_owner_names() -> None:
    assert owned(BY_CREATOR, {"created_by": "alice"}, ALICE)
    assert not owned(BY_CREATOR, {"created_by": "bob"}, ALICE)
    assert not owned(BY_HOLDER, {"holder": None}, ALICE)
    holder = uuid.uuid4()
    assert owned(BY_CARD, {"card": holder}, SessionUser.of(str(holder).upper(), "t"))
    assert not owned(BY_CARD, {"card": holder}, ALICE)
    assert owned(OwnerRule(lambda row, user: row["n"] == 1, frozenset()), {"n": 1}, ALICE)


def test_an_anonymous_caller_owns_no_row() -> None:
    assert not owned(BY_CREATOR, {"created_by": "anonymous"}, ANONYMOUS)
    table = Table("rows", MetaData(), Column("created_by", String))
    query = owned_rows(select(table), table, entity_def, BY_CREATOR, ANONYMOUS)
    assert "false" in str(query.compile(compile_kwargs={"literal_binds": True})).lower()
    assert owner_default(BY_HOLDER, entity_def, {}, ANONYMOUS) == {}


def test_a_confined_create_fills_in_a_left_out_owner_field() -> None:
    assert owner_default(BY_HOLDER, entity_def, {}, ALICE) == {"holder": "alice"}
    assert owner_default(BY_HOLDER, entity_def, {"holder": "bob"}, ALICE) == {}
    assert owner_default(BY_CREATOR, entity_def, {}, ALICE) == {}
    # A reference owner takes only a user id that is a UUID.
    assert owner_default(BY_CARD, entity_def, {}, ALICE) == {}


def test_the_rules_come_from_the_standard_handlers_and_a_bypass_role_lifts_them() -> None:
    rules = OwnerRules(Registry([feature]))
    assert rules.rule(entity_def, "read", ALICE) is None
    rule = rules.rule(entity_def, "write", ALICE)
    assert rule is not None and rule.owner == "holder"
    assert rules.rule(entity_def, "write", SessionUser.of("a", "t", ["Auditor"])) is None
