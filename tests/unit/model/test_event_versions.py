"""Event and entity versions are checked at definition time, naming the event or entity."""

from __future__ import annotations

from typing import Any

import pytest

from asanoha import DefinitionError, Entity, Feature, fields


def same(payload: dict[str, Any]) -> dict[str, Any]:
    return payload


@pytest.mark.parametrize(
    ("version", "upcasters", "message"),
    [
        (0, {}, "version must be a whole number of at least 1, not 0"),
        (True, {}, "version must be a whole number of at least 1, not True"),
        (
            2,
            {2: same},
            "upcasters are keyed by the version they read, 1 to 1 for version=2; 2 is not one",
        ),
        (
            3,
            {0: same},
            "upcasters are keyed by the version they read, 1 to 2 for version=3; 0 is not one",
        ),
        (2, {1: "up"}, "the upcaster of version 1 is not callable"),
    ],
)
def test_a_wrong_event_version_fails_naming_the_event(
    version: Any, upcasters: Any, message: str
) -> None:
    feature = Feature("crm")
    with pytest.raises(DefinitionError, match=f"event 'crm:event:renamed': {message}"):
        feature.event("renamed", version=version, upcasters=upcasters)


def test_a_wrong_entity_version_fails_naming_the_entity() -> None:
    with pytest.raises(DefinitionError, match="entity 'crm_customers': upcasters are keyed"):
        Entity(
            table="crm_customers",
            fields={"name": fields.text(personal=False, reason="fixture")},
            version=1,
            upcasters={1: lambda values, verb: values},
        )


def test_entity_events_carry_the_entity_version_and_upcast_their_fields() -> None:
    feature = Feature("crm")

    def rename(values: dict[str, Any], verb: str) -> dict[str, Any]:
        return {"full_name": values.pop("name", None), **values, "verb": verb}

    feature.entity(
        "customer",
        Entity(
            table="crm_customers",
            fields={"full_name": fields.text(personal=False, reason="fixture")},
            version=2,
            upcasters={1: rename},
        ),
    )
    events = {event.qn: event for event in feature.events}
    created = events["crm:event:customer.created"]
    deleted = events["crm:event:customer.deleted"]
    assert (created.schema_version, deleted.schema_version) == (2, 2)
    assert created.upcasters[1]({"data": {"name": "Ada"}}) == {
        "data": {"full_name": "Ada", "verb": "created"}
    }
    assert deleted.upcasters[1]({"hard": True}) == {"hard": True}
