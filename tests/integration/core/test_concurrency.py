"""Optimistic concurrency on a stream: stale versions conflict, one of N racers wins."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from asanoha import SessionUser, VersionConflictError
from asanoha.platform.store import read_events

ADMIN = SessionUser.of("admin-1", "tenant-a", ["Admin"])
UPDATE = "instructiongate:write:prompt:update"


def test_stale_version_is_a_409_with_both_versions(core: Any) -> None:
    row = core.service.dispatch_write("instructiongate:write:prompt:create", {"label": "a"}, ADMIN)
    core.service.dispatch_write(
        UPDATE, {"id": str(row["id"]), "version": 1, "changes": {"label": "b"}}, ADMIN
    )
    with pytest.raises(VersionConflictError) as raised:
        core.service.dispatch_write(
            UPDATE, {"id": str(row["id"]), "version": 1, "changes": {"label": "c"}}, ADMIN
        )
    error = raised.value
    assert (error.http_status, error.code) == (409, "version_conflict")
    assert (error.details["expected_version"], error.details["current_version"]) == (1, 2)


def test_second_create_of_a_stream_is_a_version_conflict(core: Any) -> None:
    row = core.service.dispatch_write("instructiongate:write:prompt:create", {"label": "a"}, ADMIN)
    with pytest.raises(VersionConflictError) as raised:
        core.service.dispatch_write(
            "instructiongate:write:prompt:create", {"id": str(row["id"]), "label": "b"}, ADMIN
        )
    assert raised.value.details["current_version"] == 1


def test_sixteen_concurrent_updates_of_one_version_have_exactly_one_winner(core: Any) -> None:
    row = core.service.dispatch_write(
        "instructiongate:write:prompt:create", {"label": "start"}, ADMIN
    )
    racers = 16
    barrier = threading.Barrier(racers)
    outcomes: list[str] = []
    lock = threading.Lock()

    def race(n: int) -> None:
        barrier.wait()
        try:
            core.service.dispatch_write(
                UPDATE,
                {"id": str(row["id"]), "version": 1, "changes": {"label": f"racer-{n}"}},
                ADMIN,
            )
            outcome = f"won:{n}"
        except VersionConflictError:
            outcome = "conflict"
        with lock:
            outcomes.append(outcome)

    threads = [threading.Thread(target=race, args=(n,)) for n in range(racers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    winners = [o for o in outcomes if o.startswith("won")]
    assert len(winners) == 1
    assert outcomes.count("conflict") == racers - 1
    final = core.service.dispatch_query(
        "instructiongate:query:prompt:detail", {"id": str(row["id"])}, ADMIN
    )
    assert final["version"] == 2
    assert final["label"] == f"racer-{winners[0].split(':')[1]}"
    with core.db.connect() as conn:
        versions = [e.version for e in read_events(conn, core.tables, stream_id=str(row["id"]))]
    assert versions == [1, 2]
