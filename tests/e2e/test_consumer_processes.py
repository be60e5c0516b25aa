"""Two processes advancing the same consumer at the same time never deliver an event twice."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import threading
import uuid
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import select

from asanoha.app import App
from asanoha.platform.settings import Settings
from asanoha.platform.store import append_event
from asanoha.testing.databases import TestDatabase
from tests.e2e.consumer_app import feature

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
EVENTS = 3000


def test_two_processes_on_one_consumer_deliver_each_event_once():
    database = TestDatabase.create("postgres", f"asanoha_e2e_{secrets.token_hex(6)}")
    app = App([feature], Settings(database_url=database.url, consumer_wake=False))
    try:
        app.create_schema()
        tables = app.service.tables

        def write(count: int) -> None:
            for _ in range(count):
                with app.database.begin() as conn:
                    append_event(
                        conn,
                        app.database.backend,
                        tables,
                        tenant_id="t",
                        stream_id=str(uuid.uuid4()),
                        stream_type="relay",
                        expected_version=0,
                        type="relay:event:sent",
                        payload={},
                        metadata={},
                        created_by="test",
                    )

        write(EVENTS // 2)
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "src")]),
            "ASANOHA_DATABASE_URL": database.url,
            "E2E_EXPECTED": str(EVENTS),
            "E2E_SECONDS": "60",
        }
        processes = [
            subprocess.Popen(
                [sys.executable, "-m", "tests.e2e.consumer_app"],
                cwd=ROOT,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            for _ in range(2)
        ]
        # The rest is written while both processes advance the consumer.
        writer = threading.Thread(target=write, args=(EVENTS - EVENTS // 2,))
        writer.start()
        writer.join()
        outputs = [process.communicate(timeout=120) for process in processes]
        for process, (_, err) in zip(processes, outputs, strict=True):
            assert process.returncode == 0, err.decode()
        per_process = [json.loads(out) for out, _ in outputs]
        delivered = [event_id for ids in per_process for event_id in ids]
        duplicates = [i for i, n in Counter(delivered).items() if n > 1]
        assert duplicates == []
        table = tables.entity("relay:delivery")
        with app.database.connect() as conn:
            rows = conn.execute(select(table.c.event_id)).scalars().all()
            sent = tables.events.c.type == "relay:event:sent"
            events = conn.execute(select(tables.events.c.id).where(sent)).scalars().all()
        assert len(events) == EVENTS
        assert sorted(rows) == sorted(events) == sorted(delivered)
    finally:
        app.close()
        database.drop()
