"""``Feature(toggleable=True)``: a feature switched off in a tenant answers 403
``feature_disabled`` on every entry (an HTTP write or query, a batch item, an MCP tool, a
nested ``ctx.write``) and writes nothing; other tenants and the switch back on are served."""

from __future__ import annotations

from typing import Any

import pytest

from asanoha import Feature
from asanoha.platform.errors import DefinitionError
from asanoha.testing import TestUsers
from tests.integration.core.test_entry_contracts import Refusal, call_mcp
from tests.integration.feature_settings.features import ADMIN, Nothing

DISABLED = Refusal(403, "access_denied", "feature_disabled")


def switch(stack: Any, tenant: str, *, enabled: bool) -> None:
    with stack.db.begin() as conn:
        stack.service.feature_settings.set_enabled(conn, tenant, "mailer", enabled, "test")


def test_a_disabled_feature_is_refused_on_every_entry_and_writes_nothing(stack: Any) -> None:
    admin = TestUsers.admin
    switch(stack, admin.tenant_id, enabled=False)
    send = {"to": "a@x.test"}

    with stack.nothing_written():
        error = stack.http.write_err("mailer:write:send", send, admin)
    assert Refusal(error.http_status, error.code, error.reason) == DISABLED
    assert (error.details["feature"], error.details["handler"]) == ("mailer", "mailer:write:send")

    with stack.nothing_written():
        error = stack.http.query_err("mailer:query:settings", {}, admin)
    assert Refusal(error.http_status, error.code, error.reason) == DISABLED

    with stack.nothing_written():
        response = stack.http.batch([("mailer:write:send", send)], admin)
    body = response.json()["error"]
    assert Refusal(response.status_code, body["code"], body["reason"]) == DISABLED
    assert body["details"]["index"] == 0

    # The shop is on; the mailer it calls is not.
    with stack.nothing_written():
        error = stack.http.write_err("shop:write:order", send, admin)
    assert Refusal(error.http_status, error.code, error.reason) == DISABLED
    assert error.details["feature"] == "mailer"

    assert call_mcp(stack, admin, "mailer:write:send", send) == DISABLED

    # Another tenant is served, and so is this one once the feature is on again.
    assert stack.http.write_ok("mailer:write:send", send, TestUsers.other_tenant)["id"]
    switch(stack, admin.tenant_id, enabled=True)
    assert stack.http.write_ok("mailer:write:send", send, admin)["id"]


def test_a_feature_that_is_not_toggleable_cannot_be_switched(stack: Any) -> None:
    with stack.db.begin() as conn, pytest.raises(ValueError, match="toggleable=True"):
        stack.service.feature_settings.set_enabled(conn, "tenant-a", "shop", False, "test")


def test_a_feature_off_by_default_is_refused_until_enabled(asanoha_stack: Any) -> None:
    beta = Feature("beta", toggleable=True, default_on=False)

    @beta.query_handler("ping", access=ADMIN)
    def ping(payload: Nothing, ctx: Any) -> str:
        return "pong"

    stack = asanoha_stack(features=[beta], database="sqlite")
    error = stack.http.query_err("beta:query:ping", {}, TestUsers.admin)
    assert (error.http_status, error.reason) == (403, "feature_disabled")
    with stack.db.begin() as conn:
        stack.service.feature_settings.set_enabled(conn, "tenant-a", "beta", True, "test")
    assert stack.http.query_ok("beta:query:ping", {}, TestUsers.admin) == "pong"


def test_default_off_without_toggleable_is_a_definition_error() -> None:
    with pytest.raises(DefinitionError, match="feature 'beta': default_on=False"):
        Feature("beta", default_on=False)
