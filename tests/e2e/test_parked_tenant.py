"""Two ``asanoha worker`` processes and a tenant that switched a feature off: its events are
parked while every other tenant's flow, and once it switches the feature on again the
workers deliver them, each stream in order, each event once."""

from __future__ import annotations

import time
from typing import Any

import pytest
from sqlalchemy import select

from asanoha.app import App
from asanoha.platform.model import SessionUser
from tests.e2e.conftest import e2e_app, start_asanoha_worker, stop_processes, wait_until
from tests.e2e.parking_app import CONSUMER, feature
from tests.private_redis import PrivateRedis

pytestmark = pytest.mark.e2e

APP = "tests.e2e.parking_app:app"
OFF, ON = "tenant-off", "tenant-on"
STREAMS = 4
PER_STREAM = 5


def _switch(app: App, tenant: str, *, enabled: bool) -> None:
    with app.database.begin() as conn:
        app.service.feature_settings.set_enabled(conn, tenant, "parks", enabled, "operator")


def _deliveries(app: App) -> list[Any]:
    table = app.service.tables.entity("parks:delivery")
    with app.database.connect() as conn:
        query = select(table.c.tenant, table.c.stream, table.c.n, table.c.process)
        return list(conn.execute(query.order_by(table.c.created_at, table.c.n)).all())


def _write(app: App, tenant: str, n: int) -> None:
    admin = SessionUser.of(f"admin-{tenant}", tenant, ["Admin"])
    for stream in range(STREAMS):
        app.service.dispatch_write(
            "parks:write:post", {"stream": f"{tenant}-{stream}", "n": n}, admin
        )


def test_a_switched_off_tenants_events_wait_and_then_come_in_order(private_redis: PrivateRedis):
    with e2e_app([feature], private_redis.url) as app:
        # Written while the feature is on, before any worker runs: then switched off.
        for n in range(PER_STREAM):
            _write(app, OFF, n)
        _switch(app, OFF, enabled=False)
        workers = [start_asanoha_worker(app.settings, APP) for _ in range(2)]
        try:
            for n in range(PER_STREAM):
                _write(app, ON, n)
            expected_on = STREAMS * PER_STREAM
            wait_until(lambda: len(_deliveries(app)) >= expected_on, "the other tenant's events")
            wait_until(
                lambda: (
                    next(s for s in app.consumers.status() if s.name == CONSUMER).parked
                    == STREAMS * PER_STREAM
                ),
                "the switched-off tenant's events parked",
            )
            assert {row.tenant for row in _deliveries(app)} == {ON}

            _switch(app, OFF, enabled=True)
            everything = 2 * STREAMS * PER_STREAM
            wait_until(lambda: len(_deliveries(app)) >= everything, "the parked events")
            time.sleep(1)  # a second delivery of any of them would show by now
            rows = _deliveries(app)
            assert len(rows) == everything
            for tenant in (OFF, ON):
                for stream in range(STREAMS):
                    numbers = [r.n for r in rows if r.stream == f"{tenant}-{stream}"]
                    assert numbers == list(range(PER_STREAM))
            [status] = [found for found in app.consumers.status() if found.name == CONSUMER]
            assert (status.lag, status.parked) == (0, 0)
            assert all(worker.poll() is None for worker in workers)
        finally:
            stop_processes(workers)
