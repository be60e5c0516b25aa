"""Wake-ups after commits are coalesced: a burst publishes a handful of tasks, not one each;
follow-ups of the advance task are scheduled once."""

from __future__ import annotations

import datetime as dt
import threading

from asanoha.platform.consumers import Round
from asanoha.workers.consumer_wake import BUSY_FOLLOW_UP, ConsumerWaker, FollowUps, follow_up_delay


def test_a_burst_of_wakes_publishes_one_or_two_tasks():
    sent: list[int] = []
    first = threading.Event()

    def send() -> None:
        sent.append(1)
        first.set()

    waker = ConsumerWaker(send, interval=0.2)
    for _ in range(1000):
        waker.wake()
    assert first.wait(10)
    waker.close()
    # The first wake publishes; every wake during that publish and the interval after it
    # merges into at most one more.
    assert 1 <= len(sent) <= 2


def test_a_wake_after_a_quiet_period_publishes_again():
    sent = threading.Semaphore(0)
    waker = ConsumerWaker(sent.release, interval=0.01)
    try:
        waker.wake()
        assert sent.acquire(timeout=10)
        waker.wake()
        assert sent.acquire(timeout=10)
    finally:
        waker.close()


def test_a_round_that_left_a_cursor_held_or_a_retry_asks_for_a_follow_up():
    now = dt.datetime.now(dt.UTC)
    assert follow_up_delay(Round(delivered=3), 60) is None
    assert follow_up_delay(Round(busy=("a:consumer:b",)), 60) == BUSY_FOLLOW_UP
    soon = follow_up_delay(Round(next_attempt_at=now + dt.timedelta(seconds=5)), 60)
    assert soon is not None and 4 < soon <= 5
    # Long waits are a chain of follow-ups: the broker never holds a long countdown.
    assert follow_up_delay(Round(next_attempt_at=now + dt.timedelta(hours=1)), 60) == 60
    assert follow_up_delay(Round(next_attempt_at=now - dt.timedelta(seconds=1)), 60) == 0
    # With the workers' tick: a held cursor still gets one, a failing event's attempt not.
    held = Round(busy=("a:consumer:b",), next_attempt_at=now - dt.timedelta(seconds=1))
    assert follow_up_delay(held, 60, ticking=True) == BUSY_FOLLOW_UP
    assert follow_up_delay(Round(next_attempt_at=now), 60, ticking=True) is None


def test_a_follow_up_already_scheduled_earlier_covers_a_later_one():
    sent: list[float] = []
    follow_ups = FollowUps(sent.append)
    follow_ups.want(2.0)
    follow_ups.want(5.0)
    follow_ups.want(2.0)
    assert sent == [2.0]
    follow_ups.want(0.5)
    assert sent == [2.0, 0.5]
