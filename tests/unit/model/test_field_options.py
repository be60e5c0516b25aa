"""Definition errors of field options and references: each names what to fix."""

from __future__ import annotations

from typing import Any

import pytest

from asanoha import Access, Entity, Feature, Registry, fields
from asanoha.platform.errors import DefinitionError
from asanoha.platform.model.fields import Field
from asanoha.platform.service.write_plan import build_write_plan

ADMIN = Access(roles=["Admin"])


@pytest.mark.parametrize(
    ("declared", "message"),
    [
        (fields.integer(min=5, max=1), "field 'f' of entity 'things': min=5 is greater than max=1"),
        (fields.date(min="2020-02-30"), "min='2020-02-30' is no date value"),
        (fields.timestamp(max="2020-01-01T00:00"), "needs a time zone"),
        (fields.integer(min=1.5), "min=1.5 is no integer value"),
        (fields.integer(format="email"), "format= applies to text fields only, not to a integer"),
        (
            fields.boolean(min=0),
            "min=/max= apply to date, decimal, integer, located_timestamp, money",
        ),
        (
            Field("text", format="fax", personal=False, reason="x", max_length=9),
            "format='fax' is unknown",
        ),  # type: ignore[arg-type]
        (
            Field("integer", min_items=1),
            "min_items=/max_items= apply to embedded_list, multi_select fields",
        ),
        (fields.multi_select(["a"], min_items=2), "min_items=2 exceeds its 1 choices"),
        (fields.multi_select(["a", "b"], min_items=2, max_items=1), "min_items=2 is greater"),
        (fields.multi_select(["a", "a"]), "its choices repeat a value"),
        (fields.multi_select([]), "a multi_select field needs at least one choice"),
        (Field("integer", on_delete="restrict"), "apply to reference fields only"),
        (fields.reference("x", on_delete="cascade"), "on_delete='cascade' is unknown"),  # type: ignore[arg-type]
    ],
)
def test_an_option_that_does_not_fit_its_field_fails_at_definition(
    declared: Field, message: str
) -> None:
    with pytest.raises(DefinitionError, match="field 'f' of entity 'things'") as raised:
        Entity(table="things", fields={"f": declared})
    assert message in str(raised.value)


def test_a_label_field_of_the_entity_must_be_one_of_its_fields() -> None:
    with pytest.raises(DefinitionError, match="label_field='name' names no field"):
        Entity(table="things", fields={"title": fields.integer()}, label_field="name")


def _registry(reference: Field, **target: Any) -> Registry:
    feature = Feature("crm")
    feature.crud(
        "customer",
        Entity(table="customers", fields={"age": fields.integer()}, **target),
        write=ADMIN,
        read=ADMIN,
    )
    feature.crud(
        "order", Entity(table="orders", fields={"who": reference}), write=ADMIN, read=ADMIN
    )
    return Registry([feature])


def test_a_reference_to_no_registered_entity_fails_naming_feature_entity_and_field() -> None:
    with pytest.raises(DefinitionError) as raised:
        _registry(fields.reference("supplier"))
    assert str(raised.value).startswith(
        "feature 'crm', entity 'order', field 'who': reference('supplier') names no registered"
    )


def test_a_reference_label_must_be_a_field_of_the_referenced_entity() -> None:
    with pytest.raises(DefinitionError, match="label_field='name' names no field of crm:customer"):
        _registry(fields.reference("customer", label_field="name"))


def test_a_reference_resolves_in_its_own_feature_or_by_its_full_name() -> None:
    for named in ("customer", "crm:customer"):
        registry = _registry(fields.reference(named, on_delete="restrict"), label_field="age")
        (reference,) = registry.references("crm:order")
        assert (reference.target.key, reference.label_field) == ("crm:customer", "age")
        assert registry.referrers("crm:customer") == (reference,)


def _steps(registry: Registry, qn: str) -> list[str]:
    plan = build_write_plan(registry, registry.handler(qn), None)
    return [step.name for step in plan.steps]


def test_the_write_plan_names_the_field_rule_reference_and_restrict_steps() -> None:
    registry = _registry(fields.reference("customer", on_delete="restrict"), label_field="age")
    assert _steps(registry, "crm:write:order:create") == [
        "admit",
        "idempotency",
        "transaction",
        "handler",
        "validation_and_hooks",
        "field_access",
        "references",
        "append_and_project",
        "commit",
        "outcome",
        "after_commit",
    ]
    assert "delete_restrict" in _steps(registry, "crm:write:customer:delete")
    plan = build_write_plan(registry, registry.handler("crm:write:customer:delete"), None)
    assert "crm:order.who (409)" in plan.describe()
    bounded = Feature("bounds")
    bounded.crud(
        "thing",
        Entity(table="bounded", fields={"n": fields.integer(max=3)}),
        write=ADMIN,
        read=ADMIN,
    )
    assert "field_rules" in _steps(Registry([bounded]), "bounds:write:thing:create")
