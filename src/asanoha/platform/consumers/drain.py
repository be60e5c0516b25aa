"""Consumers in ``drain()``: advance them, report dead ones, list the ones behind."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

from asanoha.platform.consumers.operations import ConsumerStatus
from asanoha.platform.consumers.registry import Consumers, RunningPass

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

    def __init__(
        self,
        timeout: float,
        behind: Sequence[ConsumerStatus] | None,
        running: Sequence[RunningPass] = (),
    ) -> None:
        self.behind = tuple(behind or ())
        self.running = tuple(running)
        pending = describe_behind(behind)
        if running:
            pending += f"; {describe_running(running)}"
        super().__init__(f"drain() timed out after {timeout:g} s; still pending: {pending}")


def describe_behind(behind: Sequence[ConsumerStatus] | None, now: dt.datetime | None = None) -> str:
    """``consumers behind: a (lag 3), b (lag 1; ...)`` for a timeout message; ``behind`` is
    ``None`` when no pass finished, so nobody knows."""
    if behind is None:
        return "consumers behind: not known (no pass finished)"
    now = now or dt.datetime.now(dt.UTC)
    listed = ", ".join(_describe_one(status, now) for status in behind) or "none"
    return f"consumers behind: {listed}"


def describe_running(running: Sequence[RunningPass]) -> str:
    """``passes still running: a (2.5 s)`` for a timeout message."""
    listed = ", ".join(f"{found.name} ({found.seconds:.1f} s)" for found in running)
    return f"passes still running: {listed}"


def _describe_one(status: ConsumerStatus, now: dt.datetime) -> str:
    if status.event_id is None:
        return f"{status.name} (lag {status.lag})"
    stopped = (
        f"stopped at event {status.event_id} after {status.attempts} failed attempt(s): "
        f"{status.last_error}"
    )
    due = status.next_attempt_at
    if due is not None and due > now:
        stopped = f"next attempt in {(due - now).total_seconds():.1f} s, {stopped}"
    return f"{status.name} (lag {status.lag}; {stopped})"


def consumers_behind(consumers: Consumers) -> list[ConsumerStatus]:
    """The consumers with committed events still to handle in a partition that is not
    disabled (every partition counts); raises ``ConsumerDeadError`` when any consumer is
    dead.

    A consumer waiting for its next attempt at a failing event (its backoff) is behind: it
    is pending work until it succeeds or is dead. A drain advances the consumers first and
    asks this after counting its other pending work, so that an event committed by a job
    that finished meanwhile is seen here.
    """
    statuses = consumers.status()
    dead = [status for status in statuses if status.status == "dead"]
    if dead:
        raise ConsumerDeadError(dead)
    return [status for status in statuses if status.behind]


def seconds_until_due(behind: Sequence[ConsumerStatus], poll_interval: float) -> float:
    """How long a drain may wait before its next pass: until the earliest next attempt when
    every consumer behind waits for one (a pass before then does nothing), else
    ``poll_interval``."""
    now = dt.datetime.now(dt.UTC)
    if not behind or not all(status.waiting(now) for status in behind):
        return poll_interval
    due = min(status.next_attempt_at for status in behind if status.next_attempt_at is not None)
    return max(poll_interval, (due - now).total_seconds())


def drain_consumers(
    consumers: Consumers, timeout: float = 10.0, *, poll_interval: float = POLL_INTERVAL
) -> None:
    """Advance the consumers until two consecutive passes find none behind (no jobs run).

    Never waits past ``timeout``: the passes run on a thread of their own, so a slow handler
    or a database that stops answering cannot hold the caller. Raises ``ConsumerDeadError``
    or ``ConsumerDrainTimeoutError`` (naming the consumers behind and the passes still
    running).
    """
    deadline = time.monotonic() + timeout
    idle = 0
    behind: list[ConsumerStatus] | None = None
    passes = ThreadPoolExecutor(max_workers=1, thread_name_prefix="asanoha-consumer-drain")
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ConsumerDrainTimeoutError(timeout, behind, consumers.running())
            pass_ = passes.submit(_drain_pass, consumers)
            try:
                behind = pass_.result(timeout=remaining)
            except FutureTimeout:
                raise ConsumerDrainTimeoutError(timeout, behind, consumers.running()) from None
            idle = idle + 1 if not behind else 0
            if idle >= IDLE_PASSES:
                return
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ConsumerDrainTimeoutError(timeout, behind, consumers.running())
            time.sleep(min(seconds_until_due(behind, poll_interval), remaining))
    finally:
        # A pass still running ends on its own; nothing waits for it.
        passes.shutdown(wait=False, cancel_futures=True)


def _drain_pass(consumers: Consumers) -> list[ConsumerStatus]:
    consumers.run_once()
    return consumers_behind(consumers)
