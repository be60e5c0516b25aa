"""Migration 0017 on a database with events and a cursor: every stored event gets the key
``append_event`` would give it, and the cursor becomes partition 0 of 1 where it was."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy import text

from asanoha import App, Settings
from asanoha.platform.store.events import partition_key
from asanoha.testing.databases import TestDatabase
from tests.integration.consumers.conftest import Recorder, append, ledger
from tests.integration.platform.test_schema import at_platform_revision

EVENTS = 12


@pytest.fixture(params=["postgres", "sqlite"])
def old_database(request: pytest.FixtureRequest) -> Iterator[TestDatabase]:
    made = TestDatabase.create(request.param, f"asanoha_parts_{uuid.uuid4().hex[:12]}")
    try:
        at_platform_revision(made, "0016")
        yield made
    finally:
        made.drop()


def test_stored_events_get_their_key_and_a_cursor_stays_where_it_was(old_database):
    app = App([ledger(Recorder())], Settings(database_url=old_database.url, broker_url="memory://"))
    try:
        now = dt.datetime.now(dt.UTC)
        with app.database.begin() as conn:
            for n in range(EVENTS):
                conn.execute(
                    text(
                        "INSERT INTO asanoha_events (stream_id, stream_type, tenant_id, version, "
                        "type, schema_version, payload, metadata, created_at, created_by) VALUES "
                        "(:stream, 'ledger', :tenant, 1, 'ledger:event:posted', 1, '{}', '{}', "
                        ":now, 'old')"
                    ),
                    {"stream": f"s{n}", "tenant": f"t{n % 3}", "now": now},
                )
            conn.execute(
                text(
                    "INSERT INTO asanoha_consumers (name, position, gaps, types, status, "
                    "attempts, skipped, updated_at) VALUES ('ledger:consumer:follow', 5, '[]', "
                    "'[\"ledger:event:posted\"]', 'idle', 0, '[]', :now)"
                ),
                {"now": now},
            )
        app.create_schema(migrations=None)
        with app.database.connect() as conn:
            rows = conn.execute(
                text("SELECT tenant_id, stream_id, partition_key FROM asanoha_events")
            ).all()
            cursors = conn.execute(
                text("SELECT name, partition, partitions, position FROM asanoha_consumers")
            ).all()
        assert len(rows) == EVENTS
        assert all(row[2] == partition_key(row[0], row[1]) for row in rows)
        assert [tuple(row) for row in cursors] == [("ledger:consumer:follow", 0, 1, 5)]
        # Appends after the upgrade are keyed as well, and the consumer goes on from 5.
        stack_event = append_to(app)
        assert app.consumers.run_once() == EVENTS - 5 + 1
        assert app.consumers.status()[0].position == stack_event
    finally:
        app.close()


def append_to(app: App) -> int:
    class Shim:
        db = app.database
        tables = app.service.tables

    return append(Shim, "after", 1).id  # type: ignore[arg-type]
