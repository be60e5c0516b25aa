"""A failing event is tried again after the consumer's backoff, not at once: ``run_once``
and ``drain()`` wait for it (without spinning), ``status()`` says when, ``restart`` ends the
wait, and after ``max_attempts`` the consumer is dead."""

from __future__ import annotations

import datetime as dt
import time

import pytest

from asanoha import Backoff
from asanoha.platform.consumers import ConsumerDeadError, ConsumerDrainTimeoutError
from asanoha.platform.store import StoredEvent
from tests.integration.consumers.conftest import EXPIRING_DRAIN, append, ledger

FOLLOW = "ledger:consumer:follow"


class Failing:
    """Fails every call (the first ``times`` calls, if given) and records when it ran."""

    def __init__(self, times: int | None = None) -> None:
        self.times = times
        self.calls: list[float] = []

    def __call__(self, event: StoredEvent, ctx: object) -> None:
        self.calls.append(time.monotonic())
        if self.times is None or len(self.calls) <= self.times:
            raise ConnectionError("the partner's API is down")


class CountedRuns:
    """Counts the passes a drain makes (wraps ``run_once``)."""

    def __init__(self, consumers) -> None:
        self.count = 0
        self._run_once = consumers.run_once
        consumers.run_once = self

    def __call__(self, *args, **kwargs) -> int:
        self.count += 1
        return self._run_once(*args, **kwargs)


def test_a_failing_event_is_not_tried_again_before_its_backoff_and_status_says_when(
    consumer_stack,
):
    handler = Failing()
    stack = consumer_stack([ledger(handler, max_attempts=3, backoff=Backoff.fixed(3600))])
    event = append(stack, "s")
    before = dt.datetime.now(dt.UTC)
    stack.consumers.run_once()
    after = dt.datetime.now(dt.UTC)
    [status] = stack.consumers.status()
    assert (status.status, status.attempts, status.event_id) == ("idle", 1, event.id)
    assert status.next_attempt_at is not None
    hour = dt.timedelta(hours=1)
    assert before + hour <= status.next_attempt_at <= after + hour
    for _ in range(3):
        stack.consumers.run_once()
    assert len(handler.calls) == 1

    # A drain counts it as pending, says when it tries again, and does not spin meanwhile.
    passes = CountedRuns(stack.app.consumers)
    with pytest.raises(ConsumerDrainTimeoutError) as raised:
        stack.drain(timeout=EXPIRING_DRAIN)
    message = str(raised.value)
    assert f"{FOLLOW} (lag 1; next attempt in 3" in message
    assert "ConnectionError: the partner's API is down" in message
    assert len(handler.calls) == 1
    assert passes.count <= 3

    # Restart ends the wait.
    stack.consumers.restart(FOLLOW)
    [status] = stack.consumers.status()
    assert (status.attempts, status.next_attempt_at) == (0, None)
    stack.consumers.run_once()
    assert len(handler.calls) == 2


def test_attempts_are_spaced_by_the_backoff_and_the_drain_waits_for_them_until_dead(
    consumer_stack,
):
    handler = Failing()
    stack = consumer_stack([ledger(handler, max_attempts=3, backoff=Backoff.fixed(0.3))])
    event = append(stack, "s")
    passes = CountedRuns(stack.app.consumers)
    with pytest.raises(ConsumerDeadError) as raised:
        stack.drain(timeout=60)
    assert f"{FOLLOW} is dead at event {event.id} after 3 attempt(s)" in str(raised.value)
    assert len(handler.calls) == 3
    waits = [
        later - earlier for earlier, later in zip(handler.calls, handler.calls[1:], strict=False)
    ]
    assert min(waits) >= 0.3
    # Two waits of 0.3 s at a 5 ms poll would be a hundred passes.
    assert passes.count <= 12
    [status] = stack.consumers.status()
    assert (status.status, status.next_attempt_at) == ("dead", None)


def test_an_exponential_backoff_doubles_and_a_success_clears_the_attempts(consumer_stack):
    handler = Failing(times=2)
    stack = consumer_stack([ledger(handler, max_attempts=5, backoff=Backoff.exponential(base=0.2))])
    append(stack, "s")
    stack.drain(timeout=60)
    assert len(handler.calls) == 3
    first, second = (b - a for a, b in zip(handler.calls, handler.calls[1:], strict=False))
    assert first >= 0.2 and second >= 0.4
    [status] = stack.consumers.status()
    assert (status.attempts, status.event_id, status.next_attempt_at) == (0, None, None)
