"""Postgres draws event ids at insert: a lower id can commit after a higher one. No event is
skipped, no rolled-back event is delivered, per-stream order holds, and a gap whose writer
rolled back is eventually forgotten; a consumer starting now waits for the transactions open
when it registered; gaps are stored as ranges."""

from __future__ import annotations

import json
import random
import threading
import time
from collections import defaultdict

import pytest
from sqlalchemy import select, text, update

from asanoha.app import App
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


# -- start="now" -----------------------------------------------------------------------------


def _late_app(stack, recorder, **options):
    """A second application on the stack's database with a consumer ``late:consumer:follow``
    starting now (a deployment that adds it while the first one writes)."""
    return App(
        [ledger(), ledger(recorder, name="late", start="now")],
        stack.app.settings,
        publish_jobs=False,
        **options,
    )


def test_a_consumer_starting_now_gets_the_event_of_a_transaction_open_at_its_registration(
    asanoha_stack,
):
    recorder = Recorder()
    stack = asanoha_stack(features=[ledger()])
    with stack.db.engine.connect() as a:
        a.begin()
        held = append(stack, "a", 1, conn=a, feature="late")
        before = append(stack, "b", 2, feature="late")
        assert before.id > held.id
        app = _late_app(stack, recorder)
        try:
            app.consumers.register()
            after = append(stack, "c", 3, feature="late")
            app.consumers.run_once()
            # Committed before the registration: not for a consumer starting now.
            assert recorder.ids == [after.id]
            a.commit()
            app.consumers.run_once()
            assert recorder.ids == [after.id, held.id]
        finally:
            app.close()


def test_a_transaction_that_drew_its_id_long_before_the_head_is_still_waited_for(asanoha_stack):
    # Thousands of events commit after the open transaction drew its id, and an existing
    # consumer passed it meanwhile: the new consumer still delivers it when it commits.
    recorder = Recorder()
    stack = asanoha_stack(features=[ledger()])
    with stack.db.engine.connect() as a:
        a.begin()
        held = append(stack, "a", 1, conn=a, feature="late")
        for n in range(300):
            append(stack, f"s{n}", n)
        stack.consumers.run_once()
        assert _gaps(stack) == 1
        for n in range(300):
            append(stack, f"t{n}", n)
        app = _late_app(stack, recorder)
        try:
            app.consumers.register()
            a.commit()
            app.consumers.run_once()
            assert recorder.ids == [held.id]
        finally:
            app.close()


def test_an_event_triggered_job_added_while_events_are_in_flight_gets_their_jobs(asanoha_stack):
    # The first deployment of an event-triggered job: the built-in job-trigger consumer
    # starts now, while a transaction holding an event of its type is still open.
    stack = asanoha_stack(features=[ledger()])
    jobs = ledger()

    @jobs.job("book", on="ledger:event:posted")
    def book(payload, ctx):
        return None

    with stack.db.engine.connect() as a:
        a.begin()
        held = append(stack, "a", 1, conn=a)
        append(stack, "b", 2)
        app = App([jobs], stack.app.settings, publish_jobs=False)
        try:
            app.consumers.register()
            a.commit()
            app.consumers.run_once()
            outbox = app.service.tables.outbox
            with app.database.connect() as conn:
                keys = conn.execute(select(outbox.c.idempotency_key)).scalars().all()
        finally:
            app.close()
    assert keys == [f"ledger:job:book@event:{held.id}"]


def test_a_rolled_back_id_below_the_head_at_registration_is_forgotten(asanoha_stack):
    recorder = Recorder()
    stack = asanoha_stack(features=[ledger()])
    with stack.db.engine.connect() as a:
        a.begin()
        append(stack, "a", 1, conn=a, feature="late")
        append(stack, "b", 2, feature="late")
        app = _late_app(stack, recorder)
        try:
            app.consumers.register()
            a.rollback()
            _forget_gaps(app.consumers)
            assert recorder.ids == []
        finally:
            app.close()


# -- gaps as ranges --------------------------------------------------------------------------

#: Appends of a failed import: every one draws an id, none commits.
FAILED_IMPORT = text(
    "INSERT INTO asanoha_events (stream_id, stream_type, tenant_id, version, type, "
    "schema_version, payload, metadata, created_at, created_by) "
    "SELECT 'import-' || n, 'ledger', 'tenant-a', 1, 'ledger:event:posted', 1, "
    "'{\"n\": 0}', '{}', now(), 'import' FROM generate_series(1, :count) AS n"
)


def _stored_gaps(stack):
    consumers = stack.tables.consumers
    with stack.db.connect() as conn:
        return conn.execute(
            select(consumers.c.gaps).where(consumers.c.name == "ledger:consumer:follow")
        ).scalar_one()


def test_a_rolled_back_import_of_fifty_thousand_events_is_one_gap_and_then_none(asanoha_stack):
    recorder = Recorder()
    stack = asanoha_stack(features=[ledger(recorder)])
    first = append(stack, "a", 1)
    with stack.db.engine.connect() as conn:
        conn.begin()
        conn.execute(FAILED_IMPORT, {"count": 50_000})
        conn.rollback()
    last = append(stack, "b", 2)
    # One pass: the next ones may forget the gap at once on a quiet server.
    stack.consumers.advance("ledger:consumer:follow")
    assert recorder.ids == [first.id, last.id]
    assert _gaps(stack) == 50_000
    stored = _stored_gaps(stack)
    assert len(stored) == 1, "one range, not an entry per id"
    assert len(json.dumps(stored)) < 100
    _forget_gaps(stack.consumers)
    assert recorder.ids == [first.id, last.id]


def test_an_open_import_committed_after_the_consumer_passed_it_is_delivered_in_batches(
    asanoha_stack,
):
    recorder = Recorder()
    stack = asanoha_stack(features=[ledger(recorder)])
    stack.app.consumers._batch_size = 100
    with stack.db.engine.connect() as conn:
        conn.begin()
        conn.execute(FAILED_IMPORT, {"count": 450})
        last = append(stack, "b", 2)
        stack.consumers.run_once()
        assert recorder.ids == [last.id]
        assert len(_stored_gaps(stack)) == 1
        conn.commit()
    stack.consumers.run_once()
    assert len(recorder.ids) == 451
    assert sorted(recorder.ids[1:]) == recorder.ids[1:]
    assert _gaps(stack) == 0


def test_a_cursor_with_gaps_stored_one_id_each_keeps_working(asanoha_stack):
    # Rows written by an older version hold [[id, bound], ...].
    recorder = Recorder()
    stack = asanoha_stack(features=[ledger(recorder)])
    consumers = stack.tables.consumers
    with stack.db.engine.connect() as a:
        a.begin()
        held = append(stack, "a", 1, conn=a)
        later = append(stack, "b", 2)
        stack.consumers.run_once()
        with stack.db.begin() as conn:
            conn.execute(
                update(consumers)
                .where(consumers.c.name == "ledger:consumer:follow")
                .values(gaps=[[held.id, None]])
            )
        a.commit()
    stack.consumers.run_once()
    assert recorder.ids == [later.id, held.id]
    assert _gaps(stack) == 0


def _forget_gaps(consumers) -> None:
    """Pass until no gap is left (other databases on the server hold back xmin a while)."""
    deadline = time.monotonic() + FORGET_TIMEOUT
    consumers.run_once()
    while sum(status.gaps for status in consumers.status()) and time.monotonic() < deadline:
        consumers.run_once()
        time.sleep(0.05)
    assert sum(status.gaps for status in consumers.status()) == 0
