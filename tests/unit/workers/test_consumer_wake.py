"""Wake-ups after commits are coalesced: a burst publishes a handful of tasks, not one each."""

from __future__ import annotations

import threading

from asanoha.workers.consumer_wake import ConsumerWaker


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
