"""Partitioned consumers: an event goes to the partition of its stream's key, each partition
has its own cursor (position, gaps, failures), operations act on one partition or all, and a
repartition loses and repeats nothing, on Postgres (out-of-order commits) and SQLite."""

from __future__ import annotations

import threading
import zlib
from collections import defaultdict

import pytest
from sqlalchemy import select

from asanoha import Feature
from asanoha.platform.errors import ConflictError, DefinitionError, NotFoundError
from asanoha.platform.store import StoredEvent
from asanoha.platform.store.events import partition_key
from tests.integration.consumers.conftest import TENANT, Recorder, append, ledger

NAME = "ledger:consumer:follow"


def _streams_in_order(recorder: Recorder, appended: list[StoredEvent]) -> None:
    """Every appended event was delivered once, each stream's in version order."""
    assert sorted(recorder.ids) == sorted(event.id for event in appended)
    by_stream: dict[str, list[int]] = defaultdict(list)
    for event in recorder.events:
        by_stream[event.stream_id].append(event.version)
    for versions in by_stream.values():
        assert versions == sorted(versions)


def _rows(stack) -> list[tuple[int, int]]:
    consumers = stack.tables.consumers
    query = (
        select(consumers.c.partition, consumers.c.partitions)
        .where(consumers.c.name == NAME)
        .order_by(consumers.c.partition)
    )
    with stack.db.connect() as conn:
        return [(int(row[0]), int(row[1])) for row in conn.execute(query)]


def test_the_partition_key_is_a_documented_stable_hash():
    assert partition_key("t", "s") == zlib.crc32(b"t\x1fs") & 0x7FFFFFFF
    assert 0 <= partition_key("x" * 64, "y" * 64) < 2**31


def test_each_partition_delivers_its_streams_in_order_and_status_sums_them(consumer_stack):
    recorder = Recorder()
    stack = consumer_stack([ledger(recorder, partitions=4)])
    appended = [append(stack, f"s{i % 20}", i) for i in range(120)]
    stored = {event.id: event for event in appended}
    with stack.db.connect() as conn:
        events = stack.tables.events
        keys = dict(conn.execute(select(events.c.id, events.c.partition_key)).all())
    assert all(
        keys[event.id] == partition_key(TENANT, event.stream_id) for event in stored.values()
    )

    [status] = stack.consumers.status()
    assert status.lag == 120 and len(status.partitions) == 4
    assert [part.partition for part in status.partitions] == [0, 1, 2, 3]
    assert sum(part.lag for part in status.partitions) == 120
    # One partition alone delivers exactly its streams.
    stack.consumers.run_partition(NAME, 2)
    assert {partition_key(TENANT, e.stream_id) % 4 for e in recorder.events} == {2}
    assert stack.consumers.status()[0].partitions[2].lag == 0

    before = len(recorder.events)
    assert stack.consumers.run_once() == 120 - before
    _streams_in_order(recorder, appended)
    [status] = stack.consumers.status()
    assert status.lag == 0 and status.status == "idle"
    assert _rows(stack) == [(p, 4) for p in range(4)]


def test_partitions_must_be_a_positive_int():
    feature = Feature("bad")
    with pytest.raises(DefinitionError, match="bad:consumer:c: partitions must be an int >= 1"):
        feature.consumer("c", on=["bad:event:e"], partitions=0)


def test_a_failing_stream_stops_its_partition_only_and_operations_take_a_partition(
    consumer_stack,
):
    def handler(event: StoredEvent, ctx) -> None:
        if event.stream_id == "poison":
            raise RuntimeError("boom")

    recorder = Recorder()

    def both(event: StoredEvent, ctx) -> None:
        handler(event, ctx)
        recorder(event, ctx)

    stack = consumer_stack([ledger(both, partitions=3, max_attempts=1)])
    bad = append(stack, "poison", 0)
    others = [append(stack, f"ok{i}", i) for i in range(30)]
    stack.consumers.run_once()
    stuck = partition_key(TENANT, "poison") % 3
    [status] = stack.consumers.status()
    assert status.status == "dead" and status.event_id == bad.id
    assert [part.status for part in status.partitions] == [
        "dead" if p == stuck else "idle" for p in range(3)
    ]
    # Streams of the other partitions were all delivered.
    delivered = set(recorder.ids)
    assert {e.id for e in others if partition_key(TENANT, e.stream_id) % 3 != stuck} <= delivered

    other = (stuck + 1) % 3
    with pytest.raises(ConflictError):
        stack.consumers.restart(NAME, other)
    with pytest.raises(NotFoundError):
        stack.consumers.restart(NAME, 3)
    with pytest.raises(ConflictError) as refused:
        stack.consumers.repartition(NAME, 2)
    assert refused.value.reason == "consumer_stopped"

    stack.consumers.disable(NAME, other)
    [status] = stack.consumers.status()
    assert status.partitions[other].status == "disabled" and status.status == "dead"
    stack.consumers.enable(NAME)
    assert stack.consumers.skip(NAME) == bad.id
    stack.consumers.run_once()
    [status] = stack.consumers.status()
    assert status.status == "idle" and status.lag == 0
    assert set(recorder.ids) == {e.id for e in others}


@pytest.mark.parametrize("steps", [(4, 2, 8), (1, 3, 1)])
def test_repartition_with_partitions_at_different_positions_loses_and_repeats_nothing(
    consumer_stack, steps
):
    first, *changes = steps
    recorder = Recorder()
    stack = consumer_stack([ledger(recorder, partitions=first)])
    stack.app.consumers._batch_size = 7
    appended = [append(stack, f"s{i % 13}", i) for i in range(80)]
    for target in changes:
        # Some partitions run ahead, others not at all, before the change.
        current = stack.consumers.partitions(NAME)
        for partition in range(0, current, 2):
            stack.consumers.advance(NAME, partition)
        appended += [append(stack, f"s{i % 13}", i) for i in range(25)]
        stack.consumers.advance(NAME, current - 1)
        assert stack.consumers.repartition(NAME, target) == current
        assert _rows(stack) == [(p, target) for p in range(target)]
        appended += [append(stack, f"t{i % 5}", i) for i in range(10)]
    stack.consumers.run_once()
    _streams_in_order(recorder, appended)
    assert stack.consumers.status()[0].lag == 0


def test_repartition_carries_an_uncommitted_event_over_as_a_gap(asanoha_stack):
    recorder = Recorder()
    stack = asanoha_stack(features=[ledger(recorder, partitions=4)])
    with stack.db.engine.connect() as held:
        held.begin()
        late = append(stack, "late", 1, conn=held)
        after = [append(stack, f"s{i}", i) for i in range(40)]
        stack.consumers.run_once()
        assert late.id not in recorder.ids
        stack.consumers.repartition(NAME, 2)
        stack.consumers.run_once()
        assert late.id not in recorder.ids
        held.commit()
    stack.consumers.run_once()
    _streams_in_order(recorder, [late, *after])


def test_concurrent_writers_committing_out_of_order_lose_nothing_across_repartitions(
    consumer_stack, database
):
    recorder = Recorder()
    stack = consumer_stack([ledger(recorder, partitions=4)])
    stack.app.consumers._batch_size = 50
    appended: list[StoredEvent] = []
    lock = threading.Lock()
    stop = threading.Event()

    def write(writer: int) -> None:
        n = 0
        while not stop.is_set() and n < 60:
            with stack.db.begin() as conn:
                event = append(stack, f"w{writer}-{n % 7}", n, conn=conn)
            with lock:
                appended.append(event)
            n += 1

    writers = [
        threading.Thread(target=write, args=(i,)) for i in range(4 if database == "postgres" else 2)
    ]
    for thread in writers:
        thread.start()
    for target in (2, 8, 3):
        stack.consumers.run_once()
        stack.consumers.repartition(NAME, target)
    for thread in writers:
        thread.join()
    stack.consumers.run_once()
    stack.consumers.run_once()
    _streams_in_order(recorder, appended)


def test_the_admin_handlers_show_each_partition_and_act_on_one(consumer_stack):
    from asanoha.handlers import consumer_admin
    from asanoha.platform.model import SessionUser

    operator = SessionUser.of("ops-1", "ops", ["SystemAdmin"])
    stack = consumer_stack(
        [ledger(Recorder(), partitions=2), consumer_admin.feature],
        settings={"operator_tenant": "ops"},
    )
    append(stack, "a", 1)
    [status] = stack.http.query_ok("consumer-admin:query:status", {}, operator)
    assert status["lag"] == 1
    assert [part["partition"] for part in status["partitions"]] == [0, 1]
    disabled = stack.http.write_ok(
        "consumer-admin:write:disable", {"name": NAME, "partition": 1}, operator
    )
    assert [part["status"] for part in disabled["partitions"]] == ["idle", "disabled"]
    assert disabled["status"] == "idle"
    enabled = stack.http.write_ok("consumer-admin:write:enable", {"name": NAME}, operator)
    assert [part["status"] for part in enabled["partitions"]] == ["idle", "idle"]


def test_drain_waits_for_every_partition_and_passes_over_a_disabled_one(consumer_stack):
    recorder = Recorder()
    stack = consumer_stack([ledger(recorder, partitions=3)])
    appended = [append(stack, f"s{i}", i) for i in range(30)]
    stack.drain()
    _streams_in_order(recorder, appended)
    keys = {partition_key(TENANT, f"s{i}") % 3 for i in range(30)}
    assert keys == {0, 1, 2}
    stack.consumers.disable(NAME, 1)
    more = [append(stack, f"s{i}", i) for i in range(30)]
    stack.drain()
    [status] = stack.consumers.status()
    assert status.lag == status.partitions[1].lag > 0
    assert not status.behind
    stack.consumers.enable(NAME, 1)
    stack.drain()
    _streams_in_order(recorder, appended + more)


def test_a_repartition_that_leaves_thousands_of_gaps_is_delivered_and_counted(consumer_stack):
    recorder = Recorder()
    stack = consumer_stack([ledger(recorder, partitions=4)])
    appended = [append(stack, f"s{i}", i) for i in range(3000)]
    # Partition 3 alone runs ahead: the others' events below it become single-id gaps.
    stack.consumers.run_partition(NAME, 3)
    stack.consumers.repartition(NAME, 3)
    [status] = stack.consumers.status()
    assert status.lag == 3000 - len(recorder.events)
    assert status.partitions[0].gaps > 500
    stack.consumers.run_once()
    _streams_in_order(recorder, appended)
    assert stack.consumers.status()[0].lag == 0
