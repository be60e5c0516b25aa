"""Mistakes about personal data fail at definition time, naming what to change."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from asanoha import Access, DefinitionError, Entity, Feature, fields


class Mail(BaseModel):
    email: str
    customer: str


@pytest.mark.parametrize(
    ("pii", "says"),
    [
        ("contains", "names no field"),
        ({}, "names no field"),
        ({"phone": "self"}, "does not have"),
        ({"email": "someone"}, "no stance"),
        ({"email": {"of": "nowhere"}}, "another field"),
    ],
)
def test_a_domain_event_names_its_personal_fields_and_their_subject(pii: object, says: str) -> None:
    with pytest.raises(DefinitionError, match=says):
        Feature("mails").event("sent", Mail, pii=pii)  # type: ignore[arg-type]


def test_a_domain_event_with_a_pii_map_is_declared() -> None:
    event = Feature("mails").event("sent", Mail, pii={"email": {"of": "customer"}})
    assert event.pii == {"email": {"of": "customer"}}


@pytest.mark.parametrize("option", ["sortable", "searchable"])
def test_a_personal_field_cannot_be_sorted_or_searched(option: str) -> None:
    with pytest.raises(DefinitionError, match=f"cannot be {option}"):
        Entity(table="people", fields={"email": fields.text(personal="self", **{option: True})})


def test_an_owner_field_cannot_be_personal() -> None:
    entity = Entity(table="tickets", fields={"holder": fields.text(personal="self")})
    with pytest.raises(DefinitionError, match="personal field"):
        Feature("desk").crud(
            "ticket",
            entity,
            write=Access(roles=["Staff"]),
            read=Access(roles=["Staff"], owner="holder"),
        )
