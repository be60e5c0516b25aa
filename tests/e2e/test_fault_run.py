"""A fault run, end to end: a burst of keyed writes over HTTP to ``asanoha serve --workers 2``
(with a read replica set), each triggering a job that writes a row and an event that a
two-partition consumer records, on two ``asanoha worker`` processes, through a Redis shutdown
and a restart of the Postgres primary. Every write, job and event is counted at the end:
none lost, none twice, no committed write answered as failed, every process still up.

The database is a private primary with a streaming standby (``tests.private_postgres``) and
the broker a private Redis: restarting them touches no other test."""

from __future__ import annotations

import secrets
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, select, text
from sqlalchemy.pool import NullPool

from asanoha.app import App
from asanoha.platform.settings import Settings
from tests.e2e.conftest import worker_environment
from tests.e2e.fault_app import ORDER_CREATE, feature
from tests.e2e.test_operator_fleet import FLEET_START, Fleet, free_port, wait_until
from tests.private_postgres import PrivatePostgres
from tests.private_redis import PrivateRedis

pytestmark = pytest.mark.e2e

APP = "tests.e2e.fault_app:app"
STAMP = "faults:job:stamp"
#: Orders written in the burst, and the threads writing them.
ORDERS = 240
WRITERS = 6
#: Seconds each writer waits between two orders: the burst lasts at least
#: ``ORDERS / WRITERS * PACE`` seconds (8 s), long enough for both faults to land inside it.
PACE = 0.2
#: Seconds a writer keeps retrying one order (same Idempotency-Key) through the faults.
RETRY_FOR = 90.0
#: Seconds the jobs and the consumer may take to settle after the burst.
SETTLE = 180.0


@dataclass
class Answers:
    """What the API answered for each order: the first status, and whether the answer that
    finally succeeded was a replay of an earlier attempt's commit."""

    first: dict[int, int] = field(default_factory=dict)
    replayed: set[int] = field(default_factory=set)
    failed: dict[int, str] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def done(self) -> int:
        with self.lock:
            return len(self.first)


def write_orders(api: str, token: str, numbers: Iterator[int], answers: Answers) -> None:
    """Write each order until it is answered 2xx, with the same Idempotency-Key every time;
    a transport error or a 5xx counts as a failed answer."""
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=api, timeout=30) as client:
        for n in numbers:
            deadline = time.monotonic() + RETRY_FOR
            first = True
            while True:
                try:
                    answer = client.post(
                        f"/api/write/{ORDER_CREATE}",
                        json={"n": n},
                        headers={**headers, "Idempotency-Key": f"order-{n}"},
                    )
                    status = answer.status_code
                except httpx.TransportError:
                    answer, status = None, 599
                if first:
                    with answers.lock:
                        answers.first[n] = status
                    first = False
                if answer is not None and answer.is_success:
                    if answer.headers.get("Idempotent-Replayed"):
                        with answers.lock:
                            answers.replayed.add(n)
                    break
                if time.monotonic() > deadline:
                    with answers.lock:
                        answers.failed[n] = f"{status} {answer.text[:200] if answer else ''}"
                    break
                time.sleep(0.3)
            time.sleep(PACE)


def shared_numbers() -> Iterator[int]:
    """One iterator of order numbers that several writer threads draw from."""
    lock = threading.Lock()
    numbers = iter(range(1, ORDERS + 1))

    def draw() -> Iterator[int]:
        while True:
            with lock:
                n = next(numbers, None)
            if n is None:
                return
            yield n

    return draw()


def test_a_burst_through_a_redis_shutdown_and_a_primary_restart_loses_and_repeats_nothing(
    tmp_path: Path,
) -> None:
    postgres, redis = PrivatePostgres(), PrivateRedis()
    postgres.start()
    redis.start()
    database = "faults"
    admin = create_engine(postgres.primary.admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"CREATE DATABASE {database}"))
    admin.dispose()
    settings = Settings(
        database_url=postgres.primary.url(database),
        read_database_url=postgres.standby.url(database),
        broker_url=redis.url,
        queue_prefix=f"asanoha-faults-{secrets.token_hex(6)}",
        visibility_timeout=15,
        job_timeout=10,
    )
    env = worker_environment(
        settings,
        ASANOHA_READ_DATABASE_URL=postgres.standby.url(database),
        ASANOHA_JWT_SECRET=secrets.token_urlsafe(32),
    )
    fleet = Fleet(tmp_path, env)
    app = App([feature], settings)
    try:
        fleet.run([sys.executable, "-m", "asanoha.cli", "migrate", "--app", APP])
        api = f"http://127.0.0.1:{free_port()}"
        fleet.start(
            "api",
            [
                sys.executable,
                "-m",
                "asanoha.cli",
                "serve",
                "--app",
                APP,
                "--port",
                api.rsplit(":")[-1],
                "--workers",
                "2",
            ],
        )
        for n in range(2):
            fleet.start(
                f"worker-{n}",
                [
                    sys.executable,
                    "-m",
                    "asanoha.cli",
                    "worker",
                    "--app",
                    APP,
                    "--concurrency",
                    "2",
                ],
            )
        wait_until(
            lambda: httpx.get(f"{api}/health", timeout=5).is_success,
            "the API answers",
            fleet,
            FLEET_START,
        )
        token = fleet.run(
            [
                sys.executable,
                "-m",
                "asanoha.cli",
                "token",
                "--app",
                APP,
                "--sub",
                "faults-1",
                "--tenant",
                "default",
                "--roles",
                "Admin",
            ]
        ).strip()

        answers = Answers()
        numbers = shared_numbers()
        writers = [
            threading.Thread(target=write_orders, args=(api, token, numbers, answers))
            for _ in range(WRITERS)
        ]
        for writer in writers:
            writer.start()
        # The faults come while the burst is under way.
        wait_until(lambda: answers.done() >= ORDERS // 4, "a quarter written", fleet, 120)
        redis.stop()
        time.sleep(2)
        redis.start()
        wait_until(lambda: answers.done() >= ORDERS // 2, "half written", fleet, 120)
        postgres.restart_primary()
        # Both faults hit the burst, not the quiet after it.
        assert answers.done() < ORDERS, "the burst ended before the primary restarted"
        for writer in writers:
            writer.join(timeout=RETRY_FOR + 60)
        assert answers.failed == {}, f"writes never answered 2xx: {answers.failed}"

        # No committed write was answered as failed: an order whose first answer failed was
        # committed by a later attempt, never replayed from the failed one's commit.
        told_failed = {n for n, status in answers.first.items() if status >= 500}
        assert told_failed & answers.replayed == set(), (
            f"committed writes answered as failed: {sorted(told_failed & answers.replayed)}"
        )

        outbox = app.service.tables.outbox  # the job rows
        engine = create_engine(settings.database_url, poolclass=NullPool)

        def settled() -> bool:
            with engine.connect() as conn:
                jobs = conn.execute(
                    select(outbox.c.state).where(outbox.c.job_qn == STAMP)
                ).scalars()
                states = Counter(jobs)
                seen = conn.execute(text("SELECT count(*) FROM faults_seen")).scalar_one()
            return states.get("succeeded", 0) >= ORDERS and seen >= ORDERS

        wait_until(settled, "every job succeeded and every event was recorded", fleet, SETTLE)

        with engine.connect() as conn:
            written = Counter(conn.execute(text("SELECT n FROM faults_orders")).scalars())
            job_rows = conn.execute(
                select(outbox.c.state, outbox.c.attempt).where(outbox.c.job_qn == STAMP)
            ).all()
            stamps = Counter(conn.execute(text("SELECT n FROM faults_stamps")).scalars())
            seen = conn.execute(
                text("SELECT n, stream, stream_version, event_id FROM faults_seen")
            ).all()
        engine.dispose()

        everyone = set(range(1, ORDERS + 1))
        assert set(written) == everyone and max(written.values()) == 1, written.most_common(3)
        assert len(job_rows) == ORDERS, f"{len(job_rows)} stamp job rows for {ORDERS} orders"
        assert {state for state, _ in job_rows} == {"succeeded"}
        assert set(stamps) == everyone
        # A job's write and its end are two commits: a stamp may be written twice only by a
        # job that ran more than one attempt (a restart between the two), never otherwise.
        repeated = {n for n, count in stamps.items() if count > 1}
        assert len(repeated) <= sum(1 for _, attempt in job_rows if attempt > 1)
        deliveries = Counter(n for n, *_ in seen)
        assert set(deliveries) == everyone and max(deliveries.values()) == 1, (
            deliveries.most_common(3)
        )
        assert len({event_id for *_, event_id in seen}) == ORDERS

        print(
            f"first answers failed: {len(told_failed)}, replayed: {len(answers.replayed)}, "
            f"jobs retried: {sum(1 for _, attempt in job_rows if attempt > 1)}, "
            f"stamps repeated: {len(repeated)}"
        )
        alive = {name: p.poll() for name, p in fleet.processes.items()}
        assert all(code is None for code in alive.values()), f"exited: {alive}\n{fleet.logs()}"
    finally:
        fleet.stop()
        app.close()
        redis.close()
        postgres.close()
