"""Mistakes in a definition fail when it is made, with a message that names the fix."""

from __future__ import annotations

from typing import Any

import pytest

from asanoha import Access, Agent, Entity, Feature, fields
from asanoha.platform.errors import ConflictError, DefinitionError, NotFoundError, render

ADMIN = Access(roles=["Admin"])


def test_access_with_a_bare_string_of_roles_is_rejected() -> None:
    with pytest.raises(DefinitionError, match=r"Access\(roles=\['Admin'\]\)"):
        Access(roles="Admin")


def test_access_with_a_blank_or_non_string_role_is_rejected() -> None:
    for roles in ([""], [3]):
        with pytest.raises(DefinitionError, match="roles are non-blank strings"):
            Access(roles=roles)  # type: ignore[list-item]


@pytest.mark.parametrize("retries", [None, "2", 1.5, True, -1])
def test_job_retries_that_are_not_a_count_are_a_definition_error(retries: Any) -> None:
    with pytest.raises(DefinitionError, match=r"shop:job:ship: retries must be a whole number"):
        Feature("shop").job("ship", manual=True, retries=retries)


def test_job_timeout_and_backoff_of_the_wrong_type_are_definition_errors() -> None:
    with pytest.raises(DefinitionError, match="shop:job:ship: timeout"):
        Feature("shop").job("ship", manual=True, timeout="5")  # type: ignore[arg-type]
    with pytest.raises(DefinitionError, match="shop:job:ship: backoff"):
        Feature("shop").job("ship", manual=True, backoff=2)  # type: ignore[arg-type]


def test_the_hard_delete_floor_suggests_high_risk_or_soft_delete_not_exclusions() -> None:
    entity = Entity(table="notes", fields={"text": fields.text(personal=False, reason="fixture")})
    with pytest.raises(DefinitionError) as raised:
        Feature("f").crud(
            "note", entity, write=ADMIN, read=ADMIN, agent={"delete": Agent(risk="mid")}
        )
    message = str(raised.value)
    assert "Agent(risk='high')" in message
    assert "soft_delete=True" in message
    assert "exclude" not in message


def test_errors_raised_without_details_keep_no_placeholders() -> None:
    for error in (ConflictError(), NotFoundError()):
        assert "{" not in error.message and "(unknown)" in error.message
    assert "{" not in render("unique_violation", {}, "developer", "de")


def test_placeholders_are_filled_by_name_only() -> None:
    text = render(
        "entity_not_found", {"entity": "f:note", "id": "{id.__class__}"}, "developer", "en"
    )
    assert text == "No f:note with id {id.__class__} exists in this tenant."
