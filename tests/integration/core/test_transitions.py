"""State transitions: an entity's map decides which value of a field may follow which."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest

from asanoha import UnprocessableError
from asanoha.testing import TestUsers
from tests.integration.core.contract_features import STATES, contracts

ADMIN = TestUsers.admin
MOVES = {"draft": ["review"], "review": ["draft", "published"]}


@pytest.fixture(params=["postgres", "sqlite"])
def stack(request: pytest.FixtureRequest, asanoha_stack: Callable[..., Any]) -> Any:
    return asanoha_stack(features=[contracts], database=request.param)


def article_in(stack: Any, status: str) -> Any:
    return stack.service.dispatch_write("contracts:write:import-article", {"status": status}, ADMIN)


def update(stack: Any, row: Any, **changes: Any) -> Any:
    payload = {"id": str(row["id"]), "version": row["version"], "changes": changes}
    return stack.service.dispatch_write("contracts:write:article:update", payload, ADMIN)


def test_every_pair_of_states_moves_exactly_as_the_map_allows(stack: Any) -> None:
    for old, new in itertools.permutations(STATES, 2):
        row = article_in(stack, old)
        if new in MOVES.get(old, []):
            assert update(stack, row, status=new)["status"] == new
            continue
        with stack.nothing_written(), pytest.raises(UnprocessableError) as raised:
            update(stack, row, status=new)
        assert raised.value.reason == "invalid_transition"
        assert raised.value.details == {
            "entity": "contracts:article",
            "field": "status",
            "from": old,
            "to": new,
            "allowed": MOVES.get(old, []),
        }


def test_an_update_that_keeps_the_state_or_leaves_it_out_moves_nothing(stack: Any) -> None:
    row = article_in(stack, "published")
    row = update(stack, row, status="published")
    assert update(stack, row, title="kept")["status"] == "published"


@pytest.mark.parametrize("status", STATES)
def test_a_create_starts_only_in_an_initial_state(stack: Any, status: str) -> None:
    create = "contracts:write:article:create"
    if status in MOVES:
        assert stack.service.dispatch_write(create, {"status": status}, ADMIN)["status"] == status
        return
    with stack.nothing_written(), pytest.raises(UnprocessableError) as raised:
        stack.service.dispatch_write(create, {"status": status}, ADMIN)
    assert raised.value.details["from"] is None
    assert raised.value.details["allowed"] == ["draft", "review"]


def test_a_create_without_the_field_starts_in_its_default(stack: Any) -> None:
    row = stack.service.dispatch_write("contracts:write:article:create", {}, ADMIN)
    assert row["status"] == "draft"


def test_the_refusal_answers_422_over_http(stack: Any) -> None:
    row = article_in(stack, "draft")
    payload = {"id": str(row["id"]), "version": row["version"], "changes": {"status": "published"}}
    error = stack.http.write_err("contracts:write:article:update", payload)
    assert (error.http_status, error.code, error.reason) == (
        422,
        "unprocessable",
        "invalid_transition",
    )
    assert "draft" in error.message and "published" in error.message
