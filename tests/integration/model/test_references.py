"""Reference fields: the referenced row must exist in the writer's tenant, lists and details
label references in ``_refs`` with one query per referenced entity, and a restricting
reference keeps its row from being deleted."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from asanoha import UnprocessableError
from asanoha.platform.store import rebuild_projection
from asanoha.testing import TestUsers
from asanoha.testing.statements import capture_statements

ADMIN = TestUsers.admin
OTHER = TestUsers.other_tenant


def write(stack: Any, qn: str, payload: dict[str, Any], user: Any = ADMIN) -> Any:
    return stack.service.dispatch_write(f"shop:write:{qn}", payload, user)


def query(stack: Any, qn: str, payload: dict[str, Any], user: Any = ADMIN) -> Any:
    return stack.service.dispatch_query(f"shop:query:{qn}", payload, user)


def customer(stack: Any, name: str, user: Any = ADMIN) -> Any:
    return write(stack, "customer:create", {"name": name}, user)


def test_a_reference_to_a_row_of_the_tenant_is_written_and_labelled(stack: Any) -> None:
    ada = customer(stack, "Ada")
    books = write(stack, "category:create", {"title": "Books"})
    row = write(stack, "order:create", {"customer": str(ada["id"]), "category": str(books["id"])})
    assert row["customer"] == ada["id"]
    detail = query(stack, "order:detail", {"id": str(row["id"])})
    assert detail["_refs"] == {str(ada["id"]): "Ada", str(books["id"]): "Books"}
    listed = query(stack, "order:list", {})
    assert listed["_refs"] == {str(ada["id"]): "Ada", str(books["id"]): "Books"}
    filtered = query(stack, "order:list", {"filter": {"customer": str(ada["id"])}})
    assert [r["id"] for r in filtered["rows"]] == [row["id"]]


def test_a_reference_to_no_live_row_of_the_tenant_is_refused(stack: Any) -> None:
    gone = customer(stack, "Gone")
    write(stack, "customer:delete", {"id": str(gone["id"])})
    missing, other_tenants, deleted = (
        str(uuid.uuid4()),
        str(customer(stack, "Bob", OTHER)["id"]),
        str(gone["id"]),
    )
    for target in (missing, other_tenants, deleted):
        with stack.nothing_written(), pytest.raises(UnprocessableError) as raised:
            write(stack, "order:create", {"customer": target})
        assert raised.value.reason == "reference_not_found"
        assert raised.value.details == {
            "entity": "shop:order",
            "field": "customer",
            "target": "shop:customer",
            "id": target,
        }


def test_an_update_to_a_missing_row_is_refused_over_http(sqlite_stack: Any) -> None:
    stack = sqlite_stack
    row = write(stack, "order:create", {})
    payload = {"id": str(row["id"]), "version": 1, "changes": {"category": str(uuid.uuid4())}}
    with stack.nothing_written():
        error = stack.http.write_err("shop:write:order:update", payload)
    assert (error.http_status, error.code, error.reason) == (
        422,
        "unprocessable",
        "reference_not_found",
    )
    assert error.details["field"] == "category"


def test_a_restricting_reference_keeps_its_row_from_being_deleted(stack: Any) -> None:
    ada = customer(stack, "Ada")
    order = write(stack, "order:create", {"customer": str(ada["id"])})
    with stack.nothing_written():
        error = stack.http.write_err("shop:write:customer:delete", {"id": str(ada["id"])})
    assert (error.http_status, error.code, error.reason) == (409, "conflict", "delete_restricted")
    assert error.details == {
        "entity": "shop:customer",
        "id": str(ada["id"]),
        "blocking": "shop:order",
        "field": "customer",
    }
    # Once the referring row is gone, the row may go.
    write(stack, "order:delete", {"id": str(order["id"])})
    assert write(stack, "customer:delete", {"id": str(ada["id"])})["is_deleted"] is True


def test_a_reference_without_on_delete_may_dangle(sqlite_stack: Any) -> None:
    stack = sqlite_stack
    books = write(stack, "category:create", {"title": "Books"})
    order = write(stack, "order:create", {"category": str(books["id"])})
    write(stack, "category:delete", {"id": str(books["id"])})
    detail = query(stack, "order:detail", {"id": str(order["id"])})
    assert detail["category"] == books["id"]
    assert detail["_refs"] == {}


def test_restoring_a_row_whose_reference_is_gone_is_refused(sqlite_stack: Any) -> None:
    stack = sqlite_stack
    books = write(stack, "category:create", {"title": "Books"})
    order = write(stack, "order:create", {"category": str(books["id"])})
    write(stack, "order:delete", {"id": str(order["id"])})
    write(stack, "category:delete", {"id": str(books["id"])})
    with stack.nothing_written(), pytest.raises(UnprocessableError) as raised:
        write(stack, "order:restore", {"id": str(order["id"])})
    assert (raised.value.reason, raised.value.details["field"]) == (
        "reference_not_found",
        "category",
    )


def _list_statements(stack: Any) -> int:
    with capture_statements(stack.db.engine) as statements:
        listed = query(stack, "order:list", {"limit": 50})
    assert len(listed["_refs"]) == 2 * len(listed["rows"])
    return len(statements)


def test_refs_cost_one_query_per_referenced_entity_whatever_the_page_size(stack: Any) -> None:
    def add_orders(count: int) -> None:
        for number in range(count):
            who = customer(stack, f"C{number}")
            what = write(stack, "category:create", {"title": f"T{number}"})
            write(stack, "order:create", {"customer": str(who["id"]), "category": str(what["id"])})

    add_orders(1)
    one_row = _list_statements(stack)
    add_orders(19)
    twenty_rows = _list_statements(stack)
    assert twenty_rows == one_row
    with capture_statements(stack.db.engine) as statements:
        query(stack, "category:list", {"limit": 50})
    # The order list's two extra statements read the customers and the categories.
    assert one_row == len(statements) + 2


def test_a_rebuilt_table_answers_the_same_refs(stack: Any) -> None:
    ada = customer(stack, "Ada")
    write(stack, "customer:update", {"id": str(ada["id"]), "version": 1, "changes": {"name": "A"}})
    for _ in range(3):
        write(stack, "order:create", {"customer": str(ada["id"])})
    before = query(stack, "order:list", {})
    with stack.db.begin() as conn:
        for key in ("shop:customer", "shop:order"):
            rebuild_projection(conn, stack.tables, stack.registry.entity(key))
    assert query(stack, "order:list", {}) == before
    assert before["_refs"] == {str(ada["id"]): "A"}


def test_a_forgotten_row_loses_its_label_and_keeps_its_referrers(stack: Any) -> None:
    # Erasure is a duty: on_delete="restrict" does not hold up forget.
    ada = write(stack, "customer:create", {"name": "Ada", "email": "ada@example.org"})
    order = write(stack, "order:create", {"customer": str(ada["id"])})
    write(stack, "forget-customer", {"id": str(ada["id"])})
    detail = query(stack, "order:detail", {"id": str(order["id"])})
    assert detail["customer"] == ada["id"]
    assert detail["_refs"] == {}
