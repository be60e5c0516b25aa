"""Shared rows (``Entity(shared=True)``): reference data every tenant reads and refers to,
written only by a ``Feature(system_scope=...)``; a restricting reference of any tenant keeps
a shared row from being deleted."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel
from sqlalchemy import select

from asanoha import (
    Access,
    AccessDeniedError,
    ConflictError,
    Entity,
    Feature,
    QueryContext,
    WriteContext,
    fields,
)
from asanoha.platform.errors import DefinitionError
from asanoha.platform.model import Registry, SessionUser
from asanoha.platform.model.entity import SHARED_TENANT
from asanoha.testing import TestUsers

ADMIN, OTHER = TestUsers.admin, TestUsers.other_tenant
OPERATOR = SessionUser.of("ops-1", "ops", ["SystemAdmin"])

plan = Entity(
    table="shared_plans",
    shared=True,
    label_field="name",
    fields={
        "name": fields.text(required=True, personal=False, reason="a plan's name", sortable=True)
    },
)
catalogue = Feature("catalogue", system_scope="the plans every tenant subscribes to")
catalogue.crud(
    "plan",
    plan,
    write=Access(roles=["SystemAdmin"]),
    read=Access(open_to_all="every tenant reads the plans"),
)

subscription = Entity(
    table="shop_subscriptions",
    fields={
        "plan": fields.reference("catalogue:plan", on_delete="restrict", required=True),
        "seats": fields.integer(),
    },
)
shop = Feature("shop")
shop.crud("subscription", subscription, write=Access(roles=["Admin"]), read=Access(roles=["Admin"]))


class Rename(BaseModel):
    id: str
    name: str


@shop.write_handler("rename-plan", access=Access(roles=["Admin"]))
def rename_plan(payload: Rename, ctx: WriteContext) -> Any:
    """A tenant's handler may read the plans but not change them."""
    row = ctx.entity("catalogue:plan").get(payload.id)
    return ctx.entity("catalogue:plan").update(payload.id, {"name": payload.name}, row["version"])


class TenantAsked(BaseModel):
    tenant: str


@catalogue.query_handler("subscriptions-of", access=Access(roles=["SystemAdmin"]))
def subscriptions_of(payload: TenantAsked, ctx: QueryContext) -> int:
    """How many subscriptions a tenant has: a read of its rows, audited."""
    rows = ctx.tenant_entity("shop:subscription", payload.tenant, reason="plan usage").list()
    return len(rows["rows"])


@shop.query_handler("peek", access=Access(roles=["Admin"]))
def peek(payload: TenantAsked, ctx: QueryContext) -> int:
    """A tenant's feature may not read another tenant's rows."""
    return len(ctx.tenant_entity("subscription", payload.tenant, reason="curious").list()["rows"])


@pytest.fixture(params=["postgres", "sqlite"])
def stack(request: pytest.FixtureRequest, asanoha_stack: Any) -> Any:
    return asanoha_stack(features=[catalogue, shop], database=request.param)


def _plans(stack: Any, user: SessionUser) -> list[str]:
    listed = stack.service.dispatch_query("catalogue:query:plan:list", {"sort": ["name"]}, user)
    return [row["name"] for row in listed["rows"]]


def test_every_tenant_reads_and_refers_to_the_shared_rows(stack: Any) -> None:
    write = stack.service.dispatch_write
    basic = write("catalogue:write:plan:create", {"name": "Basic"}, OPERATOR)
    write("catalogue:write:plan:create", {"name": "Pro"}, OPERATOR)
    assert (
        _plans(stack, ADMIN)
        == _plans(stack, OTHER)
        == _plans(stack, OPERATOR)
        == [
            "Basic",
            "Pro",
        ]
    )
    table = stack.tables.entities["catalogue:plan"]
    with stack.db.connect() as conn:
        assert set(conn.execute(select(table.c.tenant_id)).scalars()) == {SHARED_TENANT}

    for user in (ADMIN, OTHER):
        mine = write("shop:write:subscription:create", {"plan": str(basic["id"])}, user)
        detail = stack.service.dispatch_query(
            "shop:query:subscription:detail", {"id": str(mine["id"])}, user
        )
        assert detail["_refs"] == {str(basic["id"]): "Basic"}


def test_a_feature_without_system_scope_may_not_write_a_shared_row(stack: Any) -> None:
    basic = stack.service.dispatch_write("catalogue:write:plan:create", {"name": "Basic"}, OPERATOR)
    with stack.nothing_written(), pytest.raises(AccessDeniedError) as refused:
        stack.service.dispatch_write(
            "shop:write:rename-plan", {"id": str(basic["id"]), "name": "Mine"}, ADMIN
        )
    assert (refused.value.http_status, refused.value.reason) == (403, "shared_row_write_denied")
    assert refused.value.details["entity"] == "catalogue:plan"
    assert refused.value.details["operation"] == "update"
    assert _plans(stack, ADMIN) == ["Basic"]


def test_a_shared_row_another_tenant_refers_to_is_not_deleted(stack: Any) -> None:
    write = stack.service.dispatch_write
    basic = write("catalogue:write:plan:create", {"name": "Basic"}, OPERATOR)
    write("shop:write:subscription:create", {"plan": str(basic["id"])}, OTHER)
    with stack.nothing_written(), pytest.raises(ConflictError) as refused:
        write("catalogue:write:plan:delete", {"id": str(basic["id"])}, OPERATOR)
    assert refused.value.reason == "delete_restricted"
    assert refused.value.details["blocking"] == "shop:subscription"


def test_shared_entities_declared_wrong_fail_at_definition() -> None:
    loose = Feature("loose")
    loose.crud("plan", plan, write=Access(roles=["Admin"]), read=Access(roles=["Admin"]))
    with pytest.raises(DefinitionError, match="only a feature declared Feature\\('loose'"):
        Registry([loose])
    with pytest.raises(DefinitionError, match="no field may be personal"):
        Entity(table="shared_people", shared=True, fields={"email": fields.text(personal="tenant")})
    with pytest.raises(DefinitionError, match="system_scope= takes the reason"):
        Feature("blank", system_scope=" ")


def test_a_system_scope_feature_reads_a_tenants_rows_and_the_read_is_audited(stack: Any) -> None:
    basic = stack.service.dispatch_write("catalogue:write:plan:create", {"name": "Basic"}, OPERATOR)
    for _ in range(2):
        stack.service.dispatch_write(
            "shop:write:subscription:create", {"plan": str(basic["id"])}, ADMIN
        )
    counted = stack.service.dispatch_query(
        "catalogue:query:subscriptions-of", {"tenant": ADMIN.tenant_id}, OPERATOR
    )
    assert counted == 2
    events = stack.tables.events
    with stack.db.connect() as conn:
        [audit] = conn.execute(
            select(events).where(events.c.type == "asanoha:audit.cross-tenant-read")
        ).all()
    assert (audit.tenant_id, audit.stream_type, audit.created_by) == (
        ADMIN.tenant_id,
        "asanoha:audit",
        "ops-1",
    )
    assert audit.payload == {
        "entity": "shop:subscription",
        "handler": "catalogue:query:subscriptions-of",
        "reader": "ops-1",
        "reader_tenant": "ops",
        "reason": "plan usage",
    }

    # A feature without system_scope is refused before anything is read or recorded.
    with stack.nothing_written(), pytest.raises(AccessDeniedError) as refused:
        stack.service.dispatch_query("shop:query:peek", {"tenant": OTHER.tenant_id}, ADMIN)
    assert (refused.value.http_status, refused.value.reason) == (403, "cross_tenant_read_denied")
