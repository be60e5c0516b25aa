"""The wake-up rows of consumer partitions: a write arms a task only for a partition without
one; a write during a round makes the task run another; a lost task's row is taken over; a
removed partition's row goes away."""

from __future__ import annotations

import datetime as dt

from tests.integration.consumers.conftest import ledger

NAME = "ledger:consumer:follow"


def _in(seconds: float) -> dt.datetime:
    return dt.datetime.now(dt.UTC) + dt.timedelta(seconds=seconds)


def test_a_partition_with_a_pending_wake_up_arms_no_second_task(consumer_stack):
    stack = consumer_stack([ledger(partitions=4)])
    consumers = stack.consumers
    armed = consumers.arm_wakes([NAME], until=_in(60))
    assert sorted(wake.partition for wake in armed) == [0, 1, 2, 3]
    # Pending or running: the write is the task's to deliver, nothing more is published.
    assert consumers.arm_wakes([NAME], until=_in(60)) == []
    assert consumers.arm_wakes([NAME], until=_in(60), partition=2) == []


def test_a_write_during_a_round_runs_another_and_a_quiet_round_ends_the_task(consumer_stack):
    stack = consumer_stack([ledger(partitions=2)])
    consumers = stack.consumers
    first, _ = consumers.arm_wakes([NAME], until=_in(60))
    assert consumers.begin_wake(first, _in(60))
    # A write after the round's beginning (its scan may have come before the event).
    assert consumers.arm_wakes([NAME], until=_in(60)) == []
    assert consumers.end_wake_round(first, _in(60))
    # No write during that round: the task ends and the row goes; the next write arms anew.
    assert not consumers.end_wake_round(first, _in(60))
    [again] = consumers.arm_wakes([NAME], until=_in(60), partition=first.partition)
    assert again.token != first.token


def test_a_lost_task_is_replaced_and_its_late_message_does_nothing(consumer_stack):
    stack = consumer_stack([ledger()])
    consumers = stack.consumers
    [lost] = consumers.arm_wakes([NAME], until=_in(-1))
    [taken_over] = consumers.arm_wakes([NAME], until=_in(60))
    assert taken_over.token != lost.token
    assert not consumers.begin_wake(lost, _in(60))
    assert consumers.begin_wake(taken_over, _in(60))


def test_a_removed_partition_keeps_no_wake_up(consumer_stack):
    stack = consumer_stack([ledger(partitions=4)])
    consumers = stack.consumers
    wakes = consumers.arm_wakes([NAME], until=_in(60))
    consumers.repartition(NAME, 2)
    gone = next(wake for wake in wakes if wake.partition == 3)
    # A follow-up of a partition that no longer exists is not published.
    assert not consumers.hold_wake(gone, _in(60))
    kept = next(wake for wake in wakes if wake.partition == 1)
    assert consumers.hold_wake(kept, _in(60))
