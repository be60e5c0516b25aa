"""Declared projections: wrong declarations fail naming the projection; the write plan of a
standard handler shows the projections that follow its event."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Column, Integer, MetaData, String, Table

from asanoha import Access, DefinitionError, Entity, Feature, Registry, fields
from asanoha.platform.service.write_plan import build_write_plan

TOTALS = Table(
    "shop_totals",
    MetaData(),
    Column("tenant_id", String(64), primary_key=True),
    Column("count", Integer, nullable=False),
)


def shop() -> Feature:
    feature = Feature("shop")
    feature.crud(
        "order",
        Entity(table="shop_orders", fields={"amount": fields.integer()}),
        write=Access(roles=["Admin"]),
        read=Access(roles=["Admin"]),
    )
    return feature


def count(event: Any, target: Any) -> None: ...


def test_the_plan_of_a_standard_handler_names_the_projections_of_its_event() -> None:
    feature = shop()
    feature.projection("order-count", table=TOTALS, on=["shop:event:order.created"])(count)
    registry = Registry([feature])
    assert registry.projections_on("shop:event:order.created")[0].qn == (
        "shop:projection:order-count"
    )
    create = build_write_plan(registry, registry.handler("shop:write:order:create"), None)
    assert [step.name for step in create.steps][-5:-3] == [
        "append_and_project",
        "declared_projections",
    ]
    assert "shop:projection:order-count" in create.describe()
    update = build_write_plan(registry, registry.handler("shop:write:order:update"), None)
    assert "declared_projections" not in [step.name for step in update.steps]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"table": "shop_totals", "on": ["shop:event:order.created"]}, "takes a sqlalchemy Table"),
        ({"table": TOTALS, "on": []}, "names each event type it follows once"),
        (
            {"table": Table("asanoha_x", MetaData(), Column("id", Integer, primary_key=True))},
            "reserved",
        ),
        ({"table": Table("no_key", MetaData(), Column("id", Integer))}, "needs a primary key"),
    ],
)
def test_wrong_declarations_fail_naming_the_projection(options: Any, message: str) -> None:
    options = {"on": ["shop:event:order.created"], **options}
    with pytest.raises(DefinitionError, match=f"shop:projection:order-count: .*{message}"):
        shop().projection("order-count", **options)(count)


def test_an_undeclared_event_or_a_taken_table_fails_when_the_registry_is_built() -> None:
    feature = shop()
    feature.projection("order-count", table=TOTALS, on=["shop:event:order.shipped"])(count)
    with pytest.raises(
        DefinitionError, match=r"names undeclared event 'shop:event:order\.shipped'"
    ):
        Registry([feature])
    feature = shop()
    taken = Table("shop_orders", MetaData(), Column("id", Integer, primary_key=True))
    feature.projection("order-count", table=taken, on=["shop:event:order.created"])(count)
    with pytest.raises(DefinitionError, match=r"table 'shop_orders' is already shop:order's"):
        Registry([feature])


def test_an_async_projection_fails() -> None:
    async def later(event: Any, target: Any) -> None: ...

    with pytest.raises(DefinitionError, match="shop:projection:order-count"):
        shop().projection("order-count", table=TOTALS, on=["shop:event:order.created"])(later)
