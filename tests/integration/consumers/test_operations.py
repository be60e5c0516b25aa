"""One rule for the operations: restart and skip act on the event a consumer is stopped at
and refuse one stopped at none; disable and enable are a switch that leaves that state alone
(enable keeps a dead consumer dead until it is restarted)."""

from __future__ import annotations

import pytest

from asanoha import Backoff
from asanoha.platform.errors import ConflictError
from tests.integration.consumers.conftest import append, ledger
from tests.integration.consumers.test_failures import Poisoned

FOLLOW = "ledger:consumer:follow"


def _state(stack):
    [status] = stack.consumers.status()
    return status.status, status.event_id, status.attempts


@pytest.mark.parametrize("operation", ["restart", "skip"])
def test_restart_and_skip_of_a_consumer_stopped_at_no_event_are_refused_and_change_nothing(
    consumer_stack, operation
):
    stack = consumer_stack([ledger()])
    append(stack, "s")
    stack.consumers.run_once()
    before = stack.consumers.status()
    with stack.nothing_written(), pytest.raises(ConflictError) as raised:
        getattr(stack.consumers, operation)(FOLLOW)
    assert (raised.value.http_status, raised.value.reason) == (409, "consumer_not_stopped")
    assert raised.value.details == {"consumer": FOLLOW, "status": "idle"}
    assert "restart and skip apply to a consumer stopped at one" in raised.value.message
    assert stack.consumers.status() == before


def test_a_dead_consumer_disabled_and_enabled_is_still_dead_until_restarted(consumer_stack):
    handler = Poisoned(1)
    stack = consumer_stack([ledger(handler, max_attempts=2)])
    poison = append(stack, "s", 1)
    stack.consumers.run_once()
    stack.consumers.run_once()
    assert _state(stack) == ("dead", poison.id, 2)
    stack.consumers.disable(FOLLOW)
    assert _state(stack) == ("disabled", poison.id, 2)
    stack.consumers.enable(FOLLOW)
    assert _state(stack) == ("dead", poison.id, 2)
    stack.consumers.run_once()
    assert handler.calls.count(poison.id) == 2
    stack.consumers.restart(FOLLOW)
    assert _state(stack) == ("idle", poison.id, 0)
    stack.consumers.run_once()
    assert handler.calls.count(poison.id) == 3


def test_restart_of_a_disabled_dead_consumer_keeps_it_disabled_and_enable_resumes_it_idle(
    consumer_stack,
):
    handler = Poisoned(1)
    stack = consumer_stack([ledger(handler, max_attempts=1)])
    poison = append(stack, "s", 1)
    stack.consumers.run_once()
    stack.consumers.disable(FOLLOW)
    stack.consumers.restart(FOLLOW)
    assert _state(stack) == ("disabled", poison.id, 0)
    stack.consumers.run_once()
    assert handler.calls.count(poison.id) == 1
    stack.consumers.enable(FOLLOW)
    assert _state(stack) == ("idle", poison.id, 0)
    stack.consumers.run_once()
    assert handler.calls.count(poison.id) == 2


def test_skip_of_a_disabled_dead_consumer_moves_past_the_event_and_keeps_it_disabled(
    consumer_stack,
):
    stack = consumer_stack([ledger(Poisoned(1), max_attempts=1)])
    poison = append(stack, "s", 1)
    stack.consumers.run_once()
    stack.consumers.disable(FOLLOW)
    assert stack.consumers.skip(FOLLOW) == poison.id
    assert _state(stack) == ("disabled", None, 0)
    stack.consumers.enable(FOLLOW)
    assert _state(stack) == ("idle", None, 0)
    assert stack.consumers.status()[0].lag == 0


def test_restart_of_a_consumer_waiting_for_its_next_attempt_tries_at_once(consumer_stack):
    handler = Poisoned(1)
    stack = consumer_stack([ledger(handler, max_attempts=5, backoff=Backoff.fixed(3600))])
    poison = append(stack, "s", 1)
    stack.consumers.run_once()
    assert stack.consumers.status()[0].next_attempt_at is not None
    stack.consumers.restart(FOLLOW)
    assert stack.consumers.status()[0].next_attempt_at is None
    stack.consumers.run_once()
    assert handler.calls.count(poison.id) == 2


def test_disable_and_enable_are_idempotent(consumer_stack):
    stack = consumer_stack([ledger()])
    stack.consumers.register()
    stack.consumers.enable(FOLLOW)
    assert _state(stack) == ("idle", None, 0)
    stack.consumers.disable(FOLLOW)
    stack.consumers.disable(FOLLOW)
    assert _state(stack) == ("disabled", None, 0)
    stack.consumers.enable(FOLLOW)
    assert _state(stack) == ("idle", None, 0)
