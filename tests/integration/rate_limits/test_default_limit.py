"""ASANOHA_RATE_LIMIT_DEFAULT: a limit for every handler that declares none, counted where
declared limits are; a handler with rate_limit=None, reason=... stays unlimited."""

from __future__ import annotations

import pytest

from asanoha import App, SessionUser, Settings
from asanoha.platform.errors import DefinitionError
from asanoha.testing import Stack, TestUsers
from asanoha.testing.plugin import StackFactory
from tests.integration.http.conftest import assert_error
from tests.integration.rate_limits.features import defaults

ADMIN = TestUsers.admin


@pytest.fixture
def stack(asanoha_stack: StackFactory) -> Stack:
    return asanoha_stack(features=[defaults], settings={"rate_limit_default": "2/minute"})


def statuses(stack: Stack, qn: str, calls: int) -> list[int]:
    return [stack.http.query(qn, {}, ADMIN).status_code for _ in range(calls)]


def test_the_default_limits_a_handler_that_declares_none(stack: Stack) -> None:
    assert statuses(stack, "defaults:query:plain", 3) == [200, 200, 429]
    response = stack.http.query("defaults:query:plain", {}, ADMIN)
    assert response.json()["error"]["details"]["limit"] == 2
    assert int(response.headers["Retry-After"]) >= 1


def test_the_default_spares_a_handler_unlimited_with_a_reason(stack: Stack) -> None:
    assert statuses(stack, "defaults:query:unlimited", 5) == [200] * 5


def test_a_declared_limit_wins_over_the_default(stack: Stack) -> None:
    assert statuses(stack, "defaults:query:own", 4) == [200, 200, 200, 429]


def test_the_default_reaches_the_bundled_handlers_too(stack: Stack) -> None:
    limiter = stack.service.rate_limiter
    assert limiter is not None
    approve = stack.registry.handler("agent:write:approve")
    assert limiter.limit_of(approve, ADMIN) == limiter.default


def test_the_default_leaves_out_the_system_user_of_jobs_and_consumers(stack: Stack) -> None:
    system = SessionUser.system(ADMIN.tenant_id)
    for _ in range(4):
        assert stack.service.dispatch_query("defaults:query:for-jobs", {}, system) == "ok"
    assert statuses(stack, "defaults:query:for-jobs", 3) == [200, 200, 429]


def test_without_a_default_a_handler_that_declares_none_is_not_counted(
    asanoha_stack: StackFactory,
) -> None:
    stack = asanoha_stack(features=[defaults])
    assert statuses(stack, "defaults:query:plain", 5) == [200] * 5
    assert statuses(stack, "defaults:query:public", 3) == [200, 200, 429]


def test_the_default_fails_closed_when_redis_does_not_answer(asanoha_stack: StackFactory) -> None:
    stack = asanoha_stack(
        features=[defaults],
        settings={"rate_limit_default": "2/minute", "rate_limit_url": "redis://127.0.0.1:1/0"},
    )
    error = stack.http.query_err("defaults:query:plain", {}, ADMIN)
    assert_error(error, 503, "unavailable", "rate_limit_unavailable")
    assert stack.http.query("defaults:query:unlimited", {}, ADMIN).status_code == 200


def test_a_default_that_is_no_rate_names_the_setting() -> None:
    settings = Settings(rate_limit_default="often", rate_limit_url="redis://127.0.0.1:1/0")
    with pytest.raises(DefinitionError, match="ASANOHA_RATE_LIMIT_DEFAULT='often'"):
        App([defaults], settings)


def test_a_default_without_a_redis_names_the_setting() -> None:
    settings = Settings(rate_limit_default="5/minute", broker_url="memory://")
    with pytest.raises(
        DefinitionError, match=r"ASANOHA_RATE_LIMIT_DEFAULT.*ASANOHA_RATE_LIMIT_URL"
    ):
        App([], settings)
