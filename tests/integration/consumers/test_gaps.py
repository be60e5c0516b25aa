"""Postgres draws event ids at insert: a lower id can commit after a higher one. No event is
skipped, no rolled-back event is delivered, per-stream order holds, and a gap whose writer
rolled back is eventually forgotten."""

from __future__ import annotations

import random
import threading
import time
from collections import defaultdict

import pytest
from sqlalchemy import text

from asanoha.platform.errors import VersionConflictError
from tests.integration.consumers.conftest import Recorder, append, ledger

#: Seconds to wait for a rolled-back gap to be forgotten. Other databases on the same server
#: hold back the oldest running transaction id too, so this can take a moment.
FORGET_TIMEOUT = 60


def _gaps(stack) -> int:
    [status] = stack.consumers.status()
    return status.gaps


def test_an_event_committed_after_a_later_one_is_delivered_when_it_commits(asanoha_stack):
    recorder = Recorder()
    stack = asanoha_stack(features=[ledger(recorder)])
    with stack.db.engine.connect() as a:
        a.begin()
        held = append(stack, "a", 1, conn=a)
        later = append(stack, "b", 2)
        assert later.id > held.id
        stack.consumers.run_once()
        assert recorder.ids == [later.id]
        assert _gaps(stack) == 1
        # Passes while A is open neither deliver it nor forget it.
        for _ in range(3):
            stack.consumers.run_once()
        assert recorder.ids == [later.id]
        a.commit()
    stack.consumers.run_once()
    assert recorder.ids == [later.id, held.id]
    assert _gaps(stack) == 0
    assert stack.consumers.status()[0].lag == 0


def test_a_gap_whose_writer_rolled_back_is_forgotten_and_delivery_goes_on(asanoha_stack):
    recorder = Recorder()
    stack = asanoha_stack(features=[ledger(recorder)])
    with stack.db.engine.connect() as a:
        a.begin()
        rolled_back = append(stack, "a", 1, conn=a)
        committed = append(stack, "b", 2)
        stack.consumers.run_once()
        a.rollback()
    after = append(stack, "c", 3)
    stack.consumers.run_once()
    assert recorder.ids == [committed.id, after.id]
    deadline = time.monotonic() + FORGET_TIMEOUT
    while _gaps(stack) and time.monotonic() < deadline:
        stack.consumers.run_once()
        time.sleep(0.05)
    assert _gaps(stack) == 0
    assert rolled_back.id not in recorder.ids


def test_a_writer_whose_transaction_id_is_above_the_snapshot_xmax_is_still_waited_for(
    asanoha_stack,
):
    # B takes its transaction id before A does, then A draws an event id and stays open,
    # then B appends and commits. Postgres's xmax is one past the newest *completed* id
    # (B's), so A's id is at or above it: a rule "forget the gap once a later xmin reaches
    # that xmax" would forget A's event while A runs.
    recorder = Recorder()
    stack = asanoha_stack(features=[ledger(recorder)])
    with stack.db.engine.connect() as a, stack.db.engine.connect() as b:
        b.begin()
        b.execute(text("SELECT pg_current_xact_id()"))
        a.begin()
        held = append(stack, "a", 1, conn=a)
        later = append(stack, "b", 2, conn=b)
        b.commit()
        for _ in range(5):
            stack.consumers.run_once()
        assert recorder.ids == [later.id]
        assert _gaps(stack) == 1
        a.commit()
    stack.consumers.run_once()
    assert recorder.ids == [later.id, held.id]


def test_a_writer_owns_its_transaction_id_before_it_draws_an_event_id(asanoha_stack):
    stack = asanoha_stack(features=[ledger()])
    with stack.db.begin() as conn:
        event = append(stack, "s", conn=conn)
        own = conn.execute(text("SELECT pg_current_xact_id()::text::bigint")).scalar_one()
        stored = conn.execute(
            text("SELECT tx_id::text::bigint FROM asanoha_events WHERE id = :id"),
            {"id": event.id},
        ).scalar_one()
    assert stored == own


@pytest.mark.parametrize("seed", [1, 2])
def test_concurrent_writers_with_delays_and_rollbacks_each_event_delivered_once_in_stream_order(
    asanoha_stack, seed
):
    recorder = Recorder()
    stack = asanoha_stack(features=[ledger(recorder)], settings={"database_pool_size": 12})
    streams = [f"s{i}" for i in range(12)]
    committed: list[int] = []
    rolled_back: list[int] = []
    lock = threading.Lock()
    writers_done = threading.Event()
    errors: list[BaseException] = []
    per_writer = 300

    def write(index: int) -> None:
        rng = random.Random(seed * 100 + index)
        try:
            for n in range(per_writer):
                with stack.db.engine.connect() as conn:
                    conn.begin()
                    try:
                        event = append(stack, rng.choice(streams), n, conn=conn)
                    except VersionConflictError:
                        conn.rollback()
                        continue
                    if rng.random() < 0.3:
                        time.sleep(rng.random() * 0.004)
                    if rng.random() < 0.1:
                        conn.rollback()
                        with lock:
                            rolled_back.append(event.id)
                    else:
                        conn.commit()
                        with lock:
                            committed.append(event.id)
        except BaseException as error:
            errors.append(error)

    def consume() -> None:
        try:
            while not writers_done.is_set():
                stack.consumers.run_once()
        except BaseException as error:
            errors.append(error)

    writers = [threading.Thread(target=write, args=(i,)) for i in range(8)]
    consumer = threading.Thread(target=consume)
    consumer.start()
    for thread in writers:
        thread.start()
    for thread in writers:
        thread.join()
    writers_done.set()
    consumer.join()
    assert errors == []
    # Catch up, and wait until every gap left by a rollback is forgotten.
    deadline = time.monotonic() + FORGET_TIMEOUT
    stack.consumers.run_once()
    while _gaps(stack) and time.monotonic() < deadline:
        stack.consumers.run_once()
        time.sleep(0.05)
    assert _gaps(stack) == 0

    delivered = recorder.ids
    highest, late = 0, 0
    for event_id in delivered:
        late += event_id < highest
        highest = max(highest, event_id)
    # The run exercised what it is about: events committed out of id order.
    assert late > 0
    assert len(committed) > 1500
    assert len(delivered) == len(set(delivered)), "an event was delivered twice"
    assert sorted(delivered) == sorted(committed)
    assert not set(delivered) & set(rolled_back)
    versions: dict[str, list[int]] = defaultdict(list)
    for event in recorder.events:
        versions[event.stream_id].append(event.version)
    for stream, seen in versions.items():
        assert seen == list(range(1, len(seen) + 1)), f"stream {stream} out of order: {seen}"
