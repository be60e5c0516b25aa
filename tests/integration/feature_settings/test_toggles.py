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


def test_a_consumer_of_a_switched_off_feature_holds_at_its_tenants_event_and_resumes(
    asanoha_stack: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    from asanoha import Access, Entity, fields
    from asanoha.platform.consumers import passes

    monkeypatch.setattr(passes, "HOLD_RECHECK_SECONDS", 0.2)
    notes = Feature("notes-src")
    notes.crud(
        "note",
        Entity(table="toggle_notes", fields={"text": fields.text(personal=False, reason="x")}),
        write=Access(roles=["Admin"]),
        read=Access(roles=["Admin"]),
    )
    alerts = Feature("alerts", toggleable=True)
    seen: list[str] = []

    @alerts.consumer("notify", on=["notes-src:event:note.created"])
    def notify(event: Any, ctx: Any) -> None:
        seen.append(event.tenant_id)

    stack = asanoha_stack(features=[notes, alerts])
    admin, other = TestUsers.admin, TestUsers.other_tenant
    with stack.db.begin() as conn:
        stack.service.feature_settings.set_enabled(conn, admin.tenant_id, "alerts", False, "test")
    stack.http.write_ok("notes-src:write:note:create", {"text": "a"}, admin)
    stack.http.write_ok("notes-src:write:note:create", {"text": "b"}, other)

    # Held at the switched-off tenant's event: nothing delivered, no attempt spent.
    stack.consumers.run_once(["alerts:consumer:notify"])
    assert seen == []
    [status] = [s for s in stack.consumers.status() if s.name == "alerts:consumer:notify"]
    assert (status.status, status.attempts, status.lag) == ("idle", 0, 2)
    assert "feature 'alerts' is switched off in tenant" in (status.last_error or "")

    with stack.db.begin() as conn:
        stack.service.feature_settings.set_enabled(conn, admin.tenant_id, "alerts", True, "test")
    time.sleep(0.3)
    stack.consumers.run_once(["alerts:consumer:notify"])
    assert seen == [admin.tenant_id, other.tenant_id]
