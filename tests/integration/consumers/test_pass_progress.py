"""Whether a pass asks for another one right away: after a full batch, or after changing only
its gaps; not after delivering what it found in less than a batch, so that a consumer that
keeps up with its writers runs one pass per wake-up instead of pass after pass of a few
events each (what committed after a pass's scan is delivered by the next pass)."""

from __future__ import annotations

from tests.integration.consumers.conftest import Recorder, append, ledger

FOLLOW = "ledger:consumer:follow"


def test_a_pass_that_delivered_less_than_a_batch_is_done(consumer_stack):
    recorder = Recorder()
    stack = consumer_stack([ledger(recorder)])
    written = [append(stack, f"s{i}", i).id for i in range(3)]
    first = stack.consumers.advance(FOLLOW)
    assert (first.delivered, first.progressed) == (3, False)
    later = append(stack, "s9", 9).id
    second = stack.consumers.advance(FOLLOW)
    assert (second.delivered, second.progressed) == (1, False)
    assert recorder.ids == [*written, later]


def test_a_full_batch_asks_for_another_pass(consumer_stack):
    recorder = Recorder()
    stack = consumer_stack([ledger(recorder)])
    stack.app.consumers._batch_size = 2
    written = [append(stack, "s", i).id for i in range(3)]
    first = stack.consumers.advance(FOLLOW)
    assert (first.delivered, first.progressed) == (2, True)
    second = stack.consumers.advance(FOLLOW)
    assert (second.delivered, second.progressed) == (1, False)
    assert recorder.ids == written


def test_a_batch_of_other_events_only_asks_for_another_pass(asanoha_stack):
    # On Postgres a pass reads ids of every type (on SQLite its own type only).
    recorder = Recorder()
    stack = asanoha_stack(features=[ledger(recorder), ledger(name="other")])
    stack.app.consumers._batch_size = 2
    for i in range(3):
        append(stack, "o", i, feature="other")
    mine = append(stack, "m", 0).id
    # The first two ids are the other feature's: nothing delivered, the position moved.
    first = stack.consumers.advance(FOLLOW)
    assert (first.delivered, first.progressed) == (0, True)
    assert stack.consumers.run_once([FOLLOW]) == 1
    assert recorder.ids == [mine]


def test_a_pass_that_changed_only_its_gaps_asks_for_another(asanoha_stack):
    recorder = Recorder()
    stack = asanoha_stack(features=[ledger(recorder)])
    with stack.db.engine.connect() as open_writer:
        open_writer.begin()
        held = append(stack, "a", 1, conn=open_writer)
        later = append(stack, "b", 2)
        found = stack.consumers.advance(FOLLOW)
        # It delivered what it found: the gap below waits for a pass after its writer ends.
        assert (found.delivered, found.progressed) == (1, False)
        bounded = stack.consumers.advance(FOLLOW)
        # Nothing delivered, the gap's bound drawn: the pass after it may forget or find it.
        assert (bounded.delivered, bounded.progressed) == (0, True)
        open_writer.commit()
    assert stack.consumers.run_once() == 1
    assert recorder.ids == [later.id, held.id]
