"""Consumers in ``drain()``: advance them, report dead ones, list the ones behind."""

from __future__ import annotations

import time
from collections.abc import Sequence

from asanoha.platform.consumers.operations import ConsumerStatus
from asanoha.platform.consumers.registry import Consumers

#: Consecutive passes with no consumer behind that end a consumer-only drain.
IDLE_PASSES = 2
POLL_INTERVAL = 0.005


class ConsumerDeadError(AssertionError):
    """A consumer used up its attempts at an event (an assertion, so pytest shows it)."""

    def __init__(self, dead: Sequence[ConsumerStatus]) -> None:
        self.dead = tuple(dead)
        lines = [
            f"{status.name} is dead at event {status.event_id} after {status.attempts} "
            f"attempt(s): {status.last_error}"
            for status in self.dead
        ]
        super().__init__(
            "\n".join(lines) + "\n(consumers.restart(name) retries it, consumers.skip(name) "
            "moves past it)"
        )


class ConsumerDrainTimeoutError(AssertionError):
    """Consumers were still behind when a consumer-only drain's timeout ran out."""

    def __init__(self, timeout: float, behind: Sequence[ConsumerStatus]) -> None:
        self.behind = tuple(behind)
        super().__init__(
            f"drain() timed out after {timeout:g} s; still pending: {describe_behind(behind)}"
        )


def describe_behind(behind: Sequence[ConsumerStatus]) -> str:
    """``consumers behind: a (lag 3), b (lag 1)`` for a timeout message."""
    listed = ", ".join(f"{status.name} (lag {status.lag})" for status in behind) or "none"
    return f"consumers behind: {listed}"


def consumers_behind(consumers: Consumers) -> list[ConsumerStatus]:
    """The consumers (not disabled) with committed events still to handle; raises
    ``ConsumerDeadError`` when any consumer is dead.

    A drain advances the consumers first and asks this after counting its other pending
    work, so that an event committed by a job that finished meanwhile is seen here.
    """
    statuses = consumers.status()
    dead = [status for status in statuses if status.status == "dead"]
    if dead:
        raise ConsumerDeadError(dead)
    return [status for status in statuses if status.lag > 0 and status.status != "disabled"]


def drain_consumers(
    consumers: Consumers, timeout: float = 10.0, *, poll_interval: float = POLL_INTERVAL
) -> None:
    """Advance the consumers until two consecutive passes find none behind (no jobs run).

    Raises ``ConsumerDeadError`` or ``ConsumerDrainTimeoutError``.
    """
    deadline = time.monotonic() + timeout
    idle = 0
    while True:
        consumers.run_once()
        behind = consumers_behind(consumers)
        idle = idle + 1 if not behind else 0
        if idle >= IDLE_PASSES:
            return
        if time.monotonic() >= deadline:
            raise ConsumerDrainTimeoutError(timeout, behind)
        time.sleep(poll_interval)
