"""The bundled consumer-admin handlers: status, restart, skip, disable, enable over HTTP, for
system administrators only."""

from __future__ import annotations

from asanoha.handlers import consumer_admin
from asanoha.platform.model import SessionUser
from asanoha.testing import TestUsers
from tests.integration.consumers.conftest import TENANT, append, ledger
from tests.integration.consumers.test_failures import Poisoned

FOLLOW = "ledger:consumer:follow"
OPERATOR = SessionUser.of("ops", TENANT, ["SystemAdmin"])


def test_an_operator_sees_a_dead_consumer_restarts_and_skips_it(consumer_stack):
    handler = Poisoned(1)
    stack = consumer_stack([ledger(handler, max_attempts=1), consumer_admin.feature])
    poison = append(stack, "s", 1)
    stack.consumers.run_once()
    [status] = stack.http.query_ok("consumer-admin:query:status", {}, OPERATOR)
    assert status["name"] == FOLLOW
    assert (status["status"], status["event_id"], status["lag"]) == ("dead", poison.id, 1)
    assert status["last_error"] == "ValueError: cannot book n=1"

    restarted = stack.http.write_ok("consumer-admin:write:restart", {"name": FOLLOW}, OPERATOR)
    assert (restarted["status"], restarted["attempts"]) == ("idle", 0)
    skipped = stack.http.write_ok(
        "consumer-admin:write:skip", {"name": FOLLOW}, TestUsers.system_admin
    )
    assert (skipped["skipped_event_id"], skipped["lag"], skipped["status"]) == (
        poison.id,
        0,
        "idle",
    )
    disabled = stack.http.write_ok("consumer-admin:write:disable", {"name": FOLLOW}, OPERATOR)
    assert disabled["status"] == "disabled"
    enabled = stack.http.write_ok("consumer-admin:write:enable", {"name": FOLLOW}, OPERATOR)
    assert enabled["status"] == "idle"


def test_consumer_operations_are_denied_to_other_roles_and_change_nothing(consumer_stack):
    stack = consumer_stack([ledger(), consumer_admin.feature])
    stack.consumers.register()
    with stack.nothing_written():
        error = stack.http.write_err(
            "consumer-admin:write:disable", {"name": FOLLOW}, TestUsers.admin
        )
    assert (error.http_status, error.reason) == (403, "role_required")
    assert stack.consumers.status()[0].status == "idle"


def test_an_unknown_consumer_answers_not_found(consumer_stack):
    stack = consumer_stack([ledger(), consumer_admin.feature])
    error = stack.http.write_err("consumer-admin:write:restart", {"name": "x:consumer:y"}, OPERATOR)
    assert (error.http_status, error.reason) == (404, "consumer_not_found")
    assert error.details["consumer"] == "x:consumer:y"
