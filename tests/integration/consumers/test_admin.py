"""The bundled consumer-admin handlers over HTTP: the operator tenant's system administrators
see every consumer and operate them; a tenant's system administrators see their own
tenant's view and change nothing."""

from __future__ import annotations

import pytest

from asanoha.handlers import consumer_admin
from asanoha.platform.errors import AccessDeniedError
from asanoha.platform.model import SessionUser
from asanoha.testing import TestUsers
from tests.integration.consumers.conftest import TENANT, append, ledger
from tests.integration.consumers.test_failures import Poisoned

FOLLOW = "ledger:consumer:follow"
OPERATOR_TENANT = "ops"
OPERATOR = SessionUser.of("ops-1", OPERATOR_TENANT, ["SystemAdmin"])
#: System administrators of the tenant whose event failed, and of another tenant.
ADMIN_A = SessionUser.of("admin-a", TENANT, ["SystemAdmin"])
ADMIN_B = SessionUser.of("admin-b", "tenant-b", ["SystemAdmin"])
OPERATIONS = ["restart", "skip", "disable", "enable"]


def _dead_stack(consumer_stack, **settings):
    stack = consumer_stack(
        [ledger(Poisoned(1), max_attempts=1), consumer_admin.feature],
        settings={"operator_tenant": OPERATOR_TENANT, **settings},
    )
    poison = append(stack, "s", 1)
    stack.consumers.run_once()
    return stack, poison


def test_an_operator_sees_a_dead_consumer_restarts_and_skips_it(consumer_stack):
    stack, poison = _dead_stack(consumer_stack)
    [status] = stack.http.query_ok("consumer-admin:query:status", {}, OPERATOR)
    assert status["name"] == FOLLOW
    assert (status["status"], status["event_id"], status["lag"]) == ("dead", poison.id, 1)
    assert (status["last_error"], status["event_tenant"]) == ("ValueError: cannot book n=1", TENANT)
    assert status["next_attempt_at"] is None

    restarted = stack.http.write_ok("consumer-admin:write:restart", {"name": FOLLOW}, OPERATOR)
    assert (restarted["status"], restarted["attempts"]) == ("idle", 0)
    skipped = stack.http.write_ok("consumer-admin:write:skip", {"name": FOLLOW}, OPERATOR)
    assert (skipped["skipped_event_id"], skipped["lag"], skipped["status"]) == (
        poison.id,
        0,
        "idle",
    )
    disabled = stack.http.write_ok("consumer-admin:write:disable", {"name": FOLLOW}, OPERATOR)
    assert disabled["status"] == "disabled"
    enabled = stack.http.write_ok("consumer-admin:write:enable", {"name": FOLLOW}, OPERATOR)
    assert enabled["status"] == "idle"


def test_a_tenant_admin_sees_its_own_failed_event_and_another_tenant_sees_no_id_or_text(
    consumer_stack,
):
    stack, poison = _dead_stack(consumer_stack)
    append(stack, "b", 2, tenant="tenant-b")
    [own] = stack.http.query_ok("consumer-admin:query:status", {}, ADMIN_A)
    assert (own["status"], own["event_id"], own["event_tenant"]) == ("dead", poison.id, TENANT)
    assert own["last_error"] == "ValueError: cannot book n=1"
    # Lag counts the caller's tenant's events only.
    assert own["lag"] == 1

    [other] = stack.http.query_ok("consumer-admin:query:status", {}, ADMIN_B)
    assert other["status"] == "dead"
    assert (other["event_id"], other["event_tenant"], other["last_error"]) == (None, None, None)
    assert (other["attempts"], other["lag"]) == (0, 1)
    assert "cannot book" not in str(other)


@pytest.mark.parametrize("operation", OPERATIONS)
@pytest.mark.parametrize(
    "caller", [ADMIN_A, ADMIN_B], ids=["admin-of-the-event-tenant", "admin-of-another-tenant"]
)
def test_a_tenant_may_not_operate_the_shared_cursor_and_nothing_changes(
    consumer_stack, operation, caller
):
    stack, _ = _dead_stack(consumer_stack)
    before = stack.consumers.status()
    qn = f"consumer-admin:write:{operation}"
    with stack.nothing_written():
        error = stack.http.write_err(qn, {"name": FOLLOW}, caller)
    assert (error.http_status, error.code, error.reason) == (
        403,
        "access_denied",
        "operator_required",
    )
    assert error.details == {"handler": qn, "reason": "operator_required"}
    assert "ASANOHA_OPERATOR_TENANT" in error.message
    assert stack.consumers.status() == before


def test_a_job_of_a_tenant_may_not_restart_a_consumer_and_one_of_the_operator_tenant_may(
    consumer_stack,
):
    stack, poison = _dead_stack(consumer_stack)
    restart = "consumer-admin:write:restart"
    with stack.nothing_written(), pytest.raises(AccessDeniedError) as raised:
        stack.app.service.dispatch_write(restart, {"name": FOLLOW}, SessionUser.system(TENANT))
    assert raised.value.reason == "operator_required"
    restarted = stack.app.service.dispatch_write(
        restart, {"name": FOLLOW}, SessionUser.system(OPERATOR_TENANT)
    )
    assert (restarted["status"], restarted["event_id"]) == ("idle", poison.id)


def test_without_an_operator_tenant_no_caller_operates_consumers_over_http(consumer_stack):
    stack, _ = _dead_stack(consumer_stack, operator_tenant=None)
    for caller in (OPERATOR, ADMIN_A):
        with stack.nothing_written():
            error = stack.http.write_err("consumer-admin:write:restart", {"name": FOLLOW}, caller)
        assert (error.http_status, error.reason) == (403, "operator_required")
    # Nobody is the operator: every caller gets its own tenant's view.
    [status] = stack.http.query_ok("consumer-admin:query:status", {}, OPERATOR)
    assert (status["event_id"], status["last_error"]) == (None, None)


def test_consumer_operations_are_denied_to_other_roles_and_change_nothing(consumer_stack):
    stack = consumer_stack(
        [ledger(), consumer_admin.feature], settings={"operator_tenant": TestUsers.admin.tenant_id}
    )
    stack.consumers.register()
    with stack.nothing_written():
        error = stack.http.write_err(
            "consumer-admin:write:disable", {"name": FOLLOW}, TestUsers.admin
        )
    assert (error.http_status, error.reason) == (403, "role_required")
    assert stack.consumers.status()[0].status == "idle"


def test_an_unknown_consumer_answers_not_found(consumer_stack):
    stack = consumer_stack([ledger(), consumer_admin.feature], settings={"operator_tenant": "ops"})
    error = stack.http.write_err("consumer-admin:write:restart", {"name": "x:consumer:y"}, OPERATOR)
    assert (error.http_status, error.reason) == (404, "consumer_not_found")
    assert error.details["consumer"] == "x:consumer:y"
