"""Rate limits: counted in Redis per caller; the call one too many answers 429 and writes
nothing; a Redis that does not answer refuses (503) unless the limit fails open."""

from __future__ import annotations

import pytest

from asanoha import SessionUser
from asanoha.testing import Stack, TestUsers
from asanoha.testing.plugin import StackFactory
from tests.integration.http.conftest import assert_error
from tests.integration.http.rate_limit_features import limited

ADMIN = TestUsers.admin
COLLEAGUE = SessionUser.of("admin-a2", ADMIN.tenant_id, ["Admin"])
OTHER_TENANT = TestUsers.other_tenant


@pytest.fixture
def stack(asanoha_stack: StackFactory) -> Stack:
    return asanoha_stack(features=[limited])


def marks(stack: Stack) -> int:
    return stack.row_counts()["limited:mark"]


def test_the_call_one_too_many_answers_429_with_its_headers_and_writes_nothing(
    stack: Stack,
) -> None:
    for _ in range(2):
        assert stack.http.write("limited:write:per-user", {}).status_code == 200
    with stack.nothing_written():
        response = stack.http.write("limited:write:per-user", {})
    assert response.status_code == 429
    error = response.json()["error"]
    assert (error["code"], error["reason"]) == ("rate_limited", "rate_limited")
    assert error["details"]["limit"] == 2
    assert 1 <= int(response.headers["Retry-After"]) <= 60
    assert response.headers["RateLimit-Limit"] == "2"
    assert response.headers["RateLimit-Remaining"] == "0"
    assert response.headers["RateLimit-Reset"] == response.headers["Retry-After"]
    assert response.headers["RateLimit-Policy"] == "2;w=60"
    assert marks(stack) == 2


@pytest.mark.parametrize(
    ("scope", "shares_with_colleague", "shares_with_other_tenant"),
    [
        ("user", False, False),
        ("principal", False, False),
        ("tenant", True, False),
        ("ip", True, True),
    ],
)
def test_each_scope_counts_the_calls_it_names_together(
    stack: Stack, scope: str, shares_with_colleague: bool, shares_with_other_tenant: bool
) -> None:
    qn = f"limited:write:per-{scope}"
    for _ in range(2):
        assert stack.http.write(qn, {}, ADMIN).status_code == 200
    colleague = stack.http.write(qn, {}, COLLEAGUE).status_code
    other = stack.http.write(qn, {}, OTHER_TENANT).status_code
    assert colleague == (429 if shares_with_colleague else 200)
    assert other == (429 if shares_with_other_tenant else 200)


def test_an_agent_run_counts_apart_from_its_human_per_principal(stack: Stack) -> None:
    agent = ADMIN.as_agent("run-1")
    for user in (ADMIN, ADMIN, agent, agent):
        stack.service.dispatch_write("limited:write:per-principal", {}, user)
    assert marks(stack) == 4


def test_queries_are_limited_too(stack: Stack) -> None:
    assert stack.http.query("limited:query:count", {}).status_code == 200
    assert stack.http.query("limited:query:count", {}).status_code == 429


def test_a_redis_that_does_not_answer_refuses_unless_the_limit_fails_open(
    asanoha_stack: StackFactory,
) -> None:
    stack = asanoha_stack(features=[limited], settings={"rate_limit_url": "redis://127.0.0.1:1/0"})
    with stack.nothing_written():
        error = stack.http.write_err("limited:write:per-user", {})
    assert_error(error, 503, "unavailable", "rate_limit_unavailable")
    assert error.details == {"handler": "limited:write:per-user"}
    assert "fail_open=True" in error.message
    assert stack.http.write("limited:write:open-when-down", {}).status_code == 200
    assert marks(stack) == 1
