"""Two ``asanoha worker`` processes deliver a consumer with 4 partitions while 8 writers
commit out of order over 500 streams, and while the consumer is repartitioned 4 -> 2 -> 8:
every event is delivered exactly once, each stream in order, and both processes deliver at
the same time."""

from __future__ import annotations

import random
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from typing import Any

import pytest
from sqlalchemy import func, select

from asanoha.app import App
from asanoha.platform.errors import VersionConflictError
from asanoha.platform.store import append_event, stream_version
from tests.e2e.conftest import (
    ROOT,
    e2e_app,
    start_asanoha_worker,
    stop_processes,
    worker_environment,
)
from tests.e2e.partitioned_app import CONSUMER, feature

pytestmark = pytest.mark.e2e

APP = "tests.e2e.partitioned_app:app"
STREAMS = 500
WRITERS = 8
#: Events each writer commits.
PER_WRITER = 150
#: Seconds the whole delivery may take on a loaded machine.
DELIVERY_TIMEOUT = 180


class Writers:
    """8 threads appending to random streams, each holding its transaction open for a random
    moment, so that ids commit out of order."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.written = 0
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._write, args=(random.Random(seed),))
            for seed in range(WRITERS)
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def join(self) -> None:
        for thread in self._threads:
            thread.join()

    def _write(self, rng: random.Random) -> None:
        app, tables = self.app, self.app.service.tables
        done = 0
        while done < PER_WRITER:
            stream = f"s{rng.randrange(STREAMS)}"
            try:
                with app.database.begin() as conn:
                    append_event(
                        conn,
                        app.database.backend,
                        tables,
                        tenant_id="t",
                        stream_id=stream,
                        stream_type="parted",
                        expected_version=stream_version(conn, tables, "t", stream),
                        type="parted:event:noted",
                        payload={},
                        metadata={},
                        created_by="test",
                    )
                    time.sleep(rng.random() * 0.01)
            except VersionConflictError:
                continue
            done += 1
            with self._lock:
                self.written += 1


def _repartition(app: App, partitions: int) -> None:
    """``asanoha consumers repartition``, as an operator runs it."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "asanoha.cli",
            "consumers",
            "repartition",
            CONSUMER,
            str(partitions),
            "--app",
            APP,
        ],
        cwd=ROOT,
        env=worker_environment(app.settings),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert f"-> {partitions} partition(s)" in result.stdout


def _deliveries(app: App) -> list[Any]:
    table = app.service.tables.entity("parted:delivery")
    with app.database.connect() as conn:
        return list(
            conn.execute(
                select(
                    table.c.event_id,
                    table.c.stream,
                    table.c.stream_version.label("version"),
                    table.c.process,
                    table.c.at,
                )
            ).all()
        )


def _wait_for_every_event(app: App, count: int) -> None:
    table = app.service.tables.entity("parted:delivery")
    deadline = time.monotonic() + DELIVERY_TIMEOUT
    while True:
        with app.database.connect() as conn:
            delivered = conn.execute(select(func.count()).select_from(table)).scalar_one()
        [status] = app.consumers.status()
        if delivered >= count and status.lag == 0:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{delivered} of {count} delivered; {status}")
        time.sleep(0.2)


def _check(app: App, deliveries: list[Any]) -> None:
    """Each stored event delivered once, each stream's versions in the order delivered (the
    deliveries' own entity events are not the consumer's)."""
    events = app.service.tables.events
    with app.database.connect() as conn:
        stored = {
            row.id: (row.stream_id, row.version)
            for row in conn.execute(
                select(events.c.id, events.c.stream_id, events.c.version).where(
                    events.c.type == "parted:event:noted"
                )
            )
        }
    counts = Counter(row.event_id for row in deliveries)
    assert [event_id for event_id, n in counts.items() if n > 1] == []
    assert set(counts) == set(stored)
    assert all((row.stream, row.version) == stored[row.event_id] for row in deliveries)
    by_stream: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for row in deliveries:
        by_stream[row.stream].append((row.at, row.version))
    for stream, delivered in by_stream.items():
        versions = [version for _, version in sorted(delivered)]
        assert versions == list(range(1, len(versions) + 1)), stream


def _wait_for_workers(app: App, count: int) -> None:
    """Until ``count`` workers answer a ping: writes made before they are up would be
    delivered by whichever starts first, all by one process."""
    deadline = time.monotonic() + DELIVERY_TIMEOUT
    while len(app.celery.control.ping(timeout=1.0)) < count:
        assert time.monotonic() < deadline, f"{count} workers did not start"


def test_two_workers_share_the_partitions_of_one_consumer(private_redis):
    with e2e_app([feature], private_redis.url) as app:
        workers = [start_asanoha_worker(app.settings, APP, concurrency=2) for _ in range(2)]
        try:
            _wait_for_workers(app, 2)
            writers = Writers(app)
            writers.start()
            writers.join()
            _wait_for_every_event(app, WRITERS * PER_WRITER)
        finally:
            stop_processes(workers)
        deliveries = _deliveries(app)
        _check(app, deliveries)
        spans = defaultdict(list)
        for row in deliveries:
            spans[row.process].append(row.at)
        assert len(spans) >= 2, "one process delivered everything"
        # The partitions' passes overlapped in time: each process delivered while another did.
        per_process = sorted((min(ats), max(ats)) for ats in spans.values())
        assert any(
            later[0] < earlier[1]
            for i, earlier in enumerate(per_process)
            for later in per_process[i + 1 :]
        )


def test_repartitions_while_writers_run_lose_and_repeat_nothing(private_redis):
    with e2e_app([feature], private_redis.url) as app:
        workers = [start_asanoha_worker(app.settings, APP, concurrency=2) for _ in range(2)]
        try:
            writers = Writers(app)
            writers.start()
            for partitions in (2, 8):
                while writers.written < (WRITERS * PER_WRITER) // 3 * (1 if partitions == 2 else 2):
                    time.sleep(0.05)
                _repartition(app, partitions)
            writers.join()
            _wait_for_every_event(app, WRITERS * PER_WRITER)
            [status] = app.consumers.status()
            assert len(status.partitions) == 8
        finally:
            stop_processes(workers)
        _check(app, _deliveries(app))
