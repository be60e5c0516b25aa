"""Event retention: pruning waits for the consumers, archives the events as stored, and an
archive restores them as they were; aggregates load from a snapshot past a prune, and refuse
a fold that would need a pruned event."""

from __future__ import annotations

import datetime as dt
import gzip
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select, update

from asanoha import ConflictError
from asanoha.platform.store.retention import (
    ARCHIVED_COLUMNS,
    declared_retention,
    prune_events,
    restore_archive,
)
from tests.integration.aggregates.conftest import ADMIN, load, snapshot_rows
from tests.integration.aggregates.test_snapshots import EMAIL, OWNER, open_with_history

YEAR = dt.timedelta(days=365)


def age_events(stack: Any, through: int, days: int = 400) -> None:
    """Make the events up to position ``through`` ``days`` old."""
    events = stack.tables.events
    old = dt.datetime.now(dt.UTC) - dt.timedelta(days=days)
    with stack.db.begin() as conn:
        conn.execute(update(events).where(events.c.id <= through).values(created_at=old))


def stored_events(stack: Any) -> list[tuple[Any, ...]]:
    events = stack.tables.events
    columns = [events.c[name] for name in ARCHIVED_COLUMNS]
    with stack.db.connect() as conn:
        return [tuple(row) for row in conn.execute(select(*columns).order_by(events.c.id))]


def newest_position(stack: Any) -> int:
    events = stack.tables.events
    with stack.db.connect() as conn:
        return int(conn.execute(select(func.max(events.c.id))).scalar_one())


def prune(stack: Any, archive: Path | None = None) -> Any:
    with stack.db.begin() as conn:
        return prune_events(conn, stack.tables, older_than=YEAR, archive_dir=archive)


def test_pruning_waits_for_a_consumer_that_has_not_handled_the_events(stack: Any) -> None:
    account = open_with_history(stack, 2)
    age_events(stack, newest_position(stack))
    before = stored_events(stack)

    with pytest.raises(ConflictError) as refused:
        prune(stack)
    error = refused.value
    assert (error.http_status, error.code, error.reason) == (409, "conflict", "consumer_lag")
    assert error.details["consumer"] == "ledger:consumer:audit"
    assert error.details["position"] == 0
    assert stored_events(stack) == before

    stack.consumers.run_once()
    result = prune(stack)
    assert (result.pruned, result.cut) == (len(before), before[-1][0])
    assert stored_events(stack) == []
    # Younger events stay.
    stack.http.write_ok("ledger:write:deposit", {"account": account, "amount": 1}, ADMIN)
    stack.consumers.run_once()
    assert prune(stack).pruned == 0 and len(stored_events(stack)) == 1


def test_an_archive_restores_the_events_byte_for_byte(stack: Any, tmp_path: Path) -> None:
    open_with_history(stack, 3)
    old = newest_position(stack)
    age_events(stack, old)
    young = open_with_history(stack, 1)
    stack.consumers.run_once()
    before = stored_events(stack)

    first = prune(stack, tmp_path / "first").archive
    assert first is not None and first.name.endswith(".jsonl.gz")
    assert [row[1] for row in stored_events(stack)] == [young, young]
    # Sealed as stored: the archive holds no personal value in plain text.
    text = gzip.decompress(first.read_bytes()).decode()
    assert len(text.splitlines()) == 4 and EMAIL not in text and OWNER not in text

    with stack.db.begin() as conn:
        assert restore_archive(conn, stack.tables, first) == 4
    assert stored_events(stack) == before
    second = prune(stack, tmp_path / "second").archive
    assert second is not None and second.read_bytes() == first.read_bytes()


def test_aggregates_load_from_a_snapshot_past_a_prune_and_refuse_a_pruned_fold(
    stack: Any,
) -> None:
    account = open_with_history(stack, 5)
    assert load(stack, "account", account).folded == 6
    assert [row["stream_version"] for row in snapshot_rows(stack, account)] == [6]
    events = stack.tables.events
    with stack.db.connect() as conn:
        third = conn.execute(
            select(events.c.id).where(events.c.stream_id == account, events.c.version == 3)
        ).scalar_one()
    age_events(stack, third)
    stack.consumers.run_once()
    assert prune(stack).pruned == 3

    from_snapshot = load(stack, "account", account)
    assert (from_snapshot.folded, from_snapshot.state.balance) == (0, 15)
    with pytest.raises(ConflictError) as refused:
        load(stack, "account-unsnapshotted", account)
    assert refused.value.reason == "events_pruned"
    assert refused.value.details == {
        "aggregate": "ledger:account-unsnapshotted",
        "stream_id": account,
        "expected": 1,
        "found": 4,
    }


def test_event_types_keep_their_events_as_long_as_they_declare(stack: Any) -> None:
    account = open_with_history(stack, 2)
    stack.http.write_ok("ledger:write:withdraw", {"account": account, "amount": 1}, ADMIN)
    age_events(stack, newest_position(stack), days=40)
    keep_for = declared_retention(stack.registry)
    assert keep_for == {"ledger:event:withdrawn": dt.timedelta(days=30)}

    # The audit consumer lags on deposits, which this prune does not touch.
    with stack.db.begin() as conn:
        result = prune_events(conn, stack.tables, keep_for=keep_for)
    assert result.pruned == 1
    kept = [row[5] for row in stored_events(stack)]
    assert kept == ["ledger:event:opened", "ledger:event:deposited", "ledger:event:deposited"]
