"""Wake-up requests after commits are merged per process; what a wake-up task does after a
round: end it, follow up (held cursor, a retry without the tick) or hold its partition."""

from __future__ import annotations

import datetime as dt
import threading

from asanoha.platform.consumers import PassResult
from asanoha.workers.consumer_wake import (
    BUSY_FOLLOW_UP,
    STOPPED_HOLD,
    ConsumerWaker,
    NextStep,
    next_step,
)


def test_a_burst_of_wakes_sends_one_or_two_requests_naming_every_consumer():
    sent: list[tuple[str, ...]] = []
    both = threading.Event()

    def send(names: tuple[str, ...], keys: object) -> None:
        sent.append(names)
        if set().union(*sent) == {"a:consumer:x", "a:consumer:y"}:
            both.set()

    waker = ConsumerWaker(send, interval=0.2)
    for n in range(1000):
        waker.wake(["a:consumer:x"] if n % 2 else ["a:consumer:y"])
    # Waited for, not timed: on a loaded machine the merged request may come well after
    # the interval.
    assert both.wait(10)
    waker.close()
    # The first wake sends; every wake during that request and the interval after it
    # merges into at most one more.
    assert 1 <= len(sent) <= 2
    assert set().union(*sent) == {"a:consumer:x", "a:consumer:y"}


def test_a_wake_after_a_quiet_period_requests_again():
    sent = threading.Semaphore(0)
    waker = ConsumerWaker(lambda names, keys: sent.release(), interval=0.01)
    try:
        waker.wake(["a:consumer:x"])
        assert sent.acquire(timeout=10)
        waker.wake(["a:consumer:x"])
        assert sent.acquire(timeout=10)
    finally:
        waker.close()


def test_after_a_round_a_held_cursor_gets_a_follow_up_and_a_caught_up_one_ends():
    assert next_step(PassResult("a", delivered=3), ticking=True, longest=60) == NextStep("end")
    held = PassResult("a", busy=True)
    assert next_step(held, ticking=True, longest=60) == NextStep("follow_up", BUSY_FOLLOW_UP)
    assert next_step(held, ticking=False, longest=60) == NextStep("follow_up", BUSY_FOLLOW_UP)


def test_a_retry_is_a_follow_up_without_the_tick_and_a_hold_with_it():
    now = dt.datetime.now(dt.UTC)
    soon = PassResult("a", retry_at=now + dt.timedelta(seconds=5))
    assert next_step(soon, ticking=False, longest=60, now=now) == NextStep("follow_up", 5)
    assert next_step(soon, ticking=True, longest=60, now=now) == NextStep("hold", 5)
    # Long waits are a chain of follow-ups: the broker never holds a long countdown.
    late = PassResult("a", retry_at=now + dt.timedelta(hours=1))
    assert next_step(late, ticking=False, longest=60, now=now) == NextStep("follow_up", 60)
    past = PassResult("a", retry_at=now - dt.timedelta(seconds=1))
    assert next_step(past, ticking=False, longest=60, now=now) == NextStep("follow_up", 0)


def test_a_dead_or_disabled_partition_is_held_without_a_task():
    stopped = PassResult("a", stopped=True)
    assert next_step(stopped, ticking=False, longest=60) == NextStep("hold", STOPPED_HOLD)


def test_merged_wakes_keep_the_partition_keys_of_each_and_every_partition_wins():
    sent: list[tuple[tuple[str, ...], dict[str, frozenset[int]]]] = []
    first_sent, go_on, second_sent = threading.Event(), threading.Event(), threading.Event()

    def send(names: tuple[str, ...], keys: dict[str, frozenset[int]]) -> None:
        sent.append((names, dict(keys)))
        if len(sent) == 1:
            first_sent.set()
            # Held until the test has asked for the rest: they merge into the next request.
            go_on.wait(10)
        else:
            second_sent.set()

    waker = ConsumerWaker(send, interval=0.01)
    try:
        waker.wake(["a:consumer:first"])
        assert first_sent.wait(10)
        waker.wake(["a:consumer:x"], {"a:consumer:x": [1]})
        waker.wake(["a:consumer:x", "a:consumer:y"], {"a:consumer:x": [7], "a:consumer:y": [3]})
        waker.wake(["a:consumer:y"])
        go_on.set()
        assert second_sent.wait(10)
    finally:
        waker.close()
    assert sent[0] == (("a:consumer:first",), {})
    # y was asked for once without keys: every partition of it, so no keys of its own.
    assert sent[1] == (("a:consumer:x", "a:consumer:y"), {"a:consumer:x": frozenset({1, 7})})
