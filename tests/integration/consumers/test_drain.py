"""``drain()`` never waits past its deadline for a consumer pass, and its timeout names the
pass still running."""

from __future__ import annotations

import threading

import pytest

from asanoha.platform.consumers import ConsumerContext, ConsumerDrainTimeoutError
from asanoha.platform.store import StoredEvent
from asanoha.workers import DrainTimeoutError
from tests.integration.consumers.conftest import EXPIRING_DRAIN, append, ledger

FOLLOW = "ledger:consumer:follow"


class Slow:
    """A handler that holds its pass until released."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.started = threading.Event()
        self.finished = threading.Event()

    def __call__(self, event: StoredEvent, ctx: ConsumerContext) -> None:
        self.started.set()
        self.release.wait(60)
        self.finished.set()


def test_a_consumer_only_drain_returns_at_its_deadline_and_names_the_pass_still_running(
    consumer_stack,
):
    handler = Slow()
    stack = consumer_stack([ledger(handler)])
    append(stack, "s")
    try:
        with pytest.raises(ConsumerDrainTimeoutError) as raised:
            stack.drain(timeout=EXPIRING_DRAIN)
        # It did not wait for the pass.
        assert handler.started.is_set() and not handler.finished.is_set()
    finally:
        handler.release.set()
    message = str(raised.value)
    assert f"passes still running: {FOLLOW} (" in message
    assert "consumers behind: none" not in message
    assert "consumers behind: not known (no pass finished)" in message
    assert [found.name for found in raised.value.running] == [FOLLOW]


def test_a_drain_with_jobs_names_the_consumer_pass_still_running(asanoha_stack):
    handler = Slow()
    stack = asanoha_stack(
        features=[ledger(handler)],
        jobs=True,
        settings={"consumer_wake": False, "consumer_tick_interval": 0},
    )
    append(stack, "s")
    try:
        with pytest.raises(DrainTimeoutError) as raised:
            stack.drain(timeout=EXPIRING_DRAIN)
        assert handler.started.is_set() and not handler.finished.is_set()
    finally:
        handler.release.set()
    assert f"passes still running: {FOLLOW} (" in str(raised.value)
