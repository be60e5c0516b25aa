"""A write that committed is answered as committed: nothing that runs after the commit (the
commit position for replica reads, publishing its jobs, commit listeners, after_commit hooks,
metrics) turns its answer into an error, or a client retry would write it twice."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.exc import OperationalError

from asanoha import Access, Entity, Feature, StoredEvent, fields
from asanoha.platform.http.read_after import READ_AFTER_COOKIE, READ_AFTER_HEADER
from asanoha.platform.service import outbox
from asanoha.platform.service import write_pipeline as pipeline_module
from asanoha.platform.store.replica import ReadReplica
from asanoha.testing import Stack, TestUsers

pytestmark = pytest.mark.xdist_group("replica")

ADMIN = TestUsers.admin
CREATE = "ledger:write:entry:create"
TITLES = "ledger:query:entry:list"

entry = Entity(
    table="committed_entries",
    fields={"title": fields.text(required=True, personal=False, reason="fixture")},
)
ledger = Feature("ledger")
ledger.crud(
    "entry", entry, write=Access(roles=["Admin"]), read=Access(roles=["Admin"]), replica=True
)
#: The after-commit steps a test makes fail.
FAILING: set[str] = set()


@ledger.after_commit("entry")
def announce(event: StoredEvent) -> None:
    if "after_commit hook" in FAILING:
        raise RuntimeError("the after_commit hook fails")


@ledger.job("file", on=CREATE)
def file_entry(payload: dict[str, Any], ctx: Any) -> None:
    """Triggered by each entry, so a write has an outbox row to publish."""


def lose_the_primary(*args: Any, **kwargs: Any) -> Any:
    raise OperationalError(
        "SELECT pg_current_wal_insert_lsn()", {}, Exception("server closed the connection")
    )


def fail(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("fails after the commit")


def fail_when_counting_success(handler: str, outcome: str, reason: str = "") -> None:
    if outcome == "ok":
        raise RuntimeError("the metrics registry fails")


def listener_fails(events: Any) -> None:
    raise RuntimeError("the commit listener fails")


Fault = Callable[[pytest.MonkeyPatch, Stack], None]
FAULTS: dict[str, Fault] = {
    "commit position": lambda patch, stack: patch.setattr(
        ReadReplica, "commit_position", lose_the_primary
    ),
    "publish": lambda patch, stack: patch.setattr(outbox, "publish_messages", fail),
    "commit listener": lambda patch, stack: stack.service.add_commit_listener(listener_fails),
    "after_commit hook": lambda patch, stack: FAILING.add("after_commit hook"),
    "metrics": lambda patch, stack: patch.setattr(
        pipeline_module, "count_write", fail_when_counting_success
    ),
}


def entries(stack: Stack) -> list[str]:
    table = stack.tables.entities["ledger:entry"]
    with stack.db.connect() as conn:
        return list(conn.execute(select(table.c.title)).scalars())


@pytest.fixture
def stack(asanoha_stack: Any) -> Any:
    FAILING.clear()
    # A lag limit no paused test outlasts: the default (1 s) would send a slow test's reads
    # to the primary as "lagging" while replay is held, whatever they should have read.
    yield asanoha_stack(features=[ledger], replica=True, settings={"replica_max_lag": 60})
    FAILING.clear()


@pytest.mark.parametrize("step", list(FAULTS))
def test_a_committed_write_is_answered_200_when_a_step_after_its_commit_fails(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    FAULTS[step](monkeypatch, stack)
    response = stack.http.write(CREATE, {"title": "once"}, ADMIN)
    assert response.status_code == 200, response.text
    assert response.json()["data"]["title"] == "once"
    assert entries(stack) == ["once"]


@pytest.mark.parametrize("step", list(FAULTS))
def test_a_committed_batch_is_answered_200_when_a_step_after_its_commit_fails(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    FAULTS[step](monkeypatch, stack)
    response = stack.http.batch([(CREATE, {"title": "a"}), (CREATE, {"title": "b"})], ADMIN)
    assert response.status_code == 200, response.text
    assert [item["title"] for item in response.json()["data"]] == ["a", "b"]
    assert sorted(entries(stack)) == ["a", "b"]


def test_a_write_whose_position_was_not_read_sends_its_writer_to_the_primary(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, paused_replay: Any
) -> None:
    with paused_replay():
        with monkeypatch.context() as patch:
            patch.setattr(ReadReplica, "commit_position", lose_the_primary)
            response = stack.http.write(CREATE, {"title": "mine"}, ADMIN)
        assert response.status_code == 200, response.text
        position = response.headers[READ_AFTER_HEADER]
        assert READ_AFTER_COOKIE in response.cookies
        # The cookie goes back by itself: the writer reads its own write from the primary,
        # although the standby has not replayed it.
        listed = stack.http.query(TITLES, {}, ADMIN).json()["data"]["rows"]
        assert [row["title"] for row in listed] == ["mine"]
        stack.http.client.cookies.clear()
        again = stack.http.query(TITLES, {}, ADMIN, headers={READ_AFTER_HEADER: position})
        assert [row["title"] for row in again.json()["data"]["rows"]] == ["mine"]
        # Another caller reads the standby, which lacks it.
        stack.http.client.cookies.clear()
        assert stack.http.query(TITLES, {}, ADMIN).json()["data"]["rows"] == []
