"""Aggregate declarations: what is wrong fails at import (or when the registry is built for
what names an event), naming the feature and the aggregate."""

from __future__ import annotations

from typing import Any

import pytest

from asanoha import DefinitionError, Feature, Registry


def test_a_class_with_apply_methods_resolves_them_to_the_events_they_name() -> None:
    shop = Feature("shop")
    placed = shop.event("order-placed")
    shipped = shop.event("order.shipped")

    @shop.aggregate("order", snapshot_every=10)
    class Order:
        def __init__(self) -> None:
            self.status = "new"

        def apply_order_placed(self, event: Any) -> None:
            self.status = "placed"

        def apply_order_shipped(self, event: Any) -> None:
            self.status = "shipped"

    found = Registry([shop]).find_aggregate("shop:order")
    assert found is not None
    assert found.handlers == {placed.qn: "apply_order_placed", shipped.qn: "apply_order_shipped"}
    assert (found.form, found.snapshot_every, found.has_apply) == ("class", 10, False)
    assert found.version.startswith("h:")


def test_an_apply_method_that_names_no_event_fails_naming_feature_and_aggregate() -> None:
    shop = Feature("shop")
    shop.event("order-placed")

    @shop.aggregate("order")
    class Order:
        def apply_order_cancelled(self, event: Any) -> None: ...

    with pytest.raises(DefinitionError, match=r"aggregate 'order' of feature 'shop'.*cancelled"):
        Registry([shop])


@pytest.mark.parametrize(
    ("target", "options", "message"),
    [
        (type("Empty", (), {}), {}, "declares no apply_<event> method"),
        (type("Needs", (), {"__init__": lambda self, x: None, "apply": print}), {}, "without"),
        (type("Bad", (), {"apply_Placed": print}), {}, "is not an apply_<event> method"),
        (lambda state: state, {}, "takes \\(state, event\\)"),
        (type("Fine", (), {"apply": print}), {"snapshot_every": 0}, "snapshot_every"),
        (type("Fine", (), {"apply": print}), {"version": ""}, "version"),
        (42, {}, "not int"),
    ],
)
def test_wrong_declarations_fail_at_import(target: Any, options: Any, message: str) -> None:
    shop = Feature("shop")
    with pytest.raises(DefinitionError, match=f"aggregate 'order' of feature 'shop'.*{message}"):
        shop.aggregate("order", **options)(target)


def test_an_aggregate_declared_twice_fails() -> None:
    shop = Feature("shop")
    shop.aggregate("order")(lambda state, event: state)
    with pytest.raises(DefinitionError, match="declares aggregate 'order' twice"):
        shop.aggregate("order")


def test_a_declared_version_replaces_the_digest_of_the_code() -> None:
    shop = Feature("shop")

    @shop.aggregate("totals", version=3)
    def totals(state: Any, event: Any) -> Any:
        return state

    found = Registry([shop]).find_aggregate("shop:totals")
    assert found is not None and (found.form, found.version) == ("fold", "v:3")
