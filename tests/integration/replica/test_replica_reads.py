"""Queries declared ``replica=True`` read the hot standby, without losing read-your-writes.

The standby is the local one of ``scripts/replica.sh`` (port 5433), streaming from the
primary every test database lives on; ``paused_replay`` holds its replay still, so a write is
on the primary and not yet on the standby for as long as a test needs.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from prometheus_client import REGISTRY

from asanoha import App, Feature, QueryContext, Settings
from asanoha.platform.errors import DefinitionError
from asanoha.platform.http.read_after import READ_AFTER_COOKIE, READ_AFTER_HEADER
from asanoha.platform.model import SessionUser
from asanoha.testing import Stack, TestUsers
from tests.integration.replica.conftest import Empty, note

pytestmark = pytest.mark.xdist_group("replica")

TITLES = "notes:query:titles"
CREATE = "notes:write:note:create"
ADMIN = TestUsers.admin
# Another admin of the same tenant: it sees the same rows, but never wrote them.
OTHER = SessionUser.of("admin-other", ADMIN.tenant_id, ["Admin"])


def served(served_by: str, reason: str = "") -> float:
    labels = {"served_by": served_by, "reason": reason}
    return REGISTRY.get_sample_value("asanoha_replica_reads_total", labels) or 0.0


SERVED_BY = [("replica", "")] + [
    ("primary", reason) for reason in ("unavailable", "lagging", "behind_caller", "not_standby")
]


def served_all() -> dict[tuple[str, str], float]:
    return {labels: served(*labels) for labels in SERVED_BY}


def served_since(before: dict[tuple[str, str], float]) -> list[tuple[str, str]]:
    """Which of the served-by counters moved since ``before``: why a read went where it did."""
    return [labels for labels, count in served_all().items() if count != before[labels]]


def create(stack: Stack, title: str, user: SessionUser = ADMIN) -> str:
    """Create a note over HTTP; the write's position, as its answer gives it."""
    response = stack.http.write(CREATE, {"title": title}, user)
    assert response.status_code == 200, response.text
    return response.headers[READ_AFTER_HEADER]


def titles(stack: Stack, user: SessionUser, **headers: str) -> Any:
    # A fresh cookie jar each time: only what the test sends counts.
    stack.http.client.cookies.clear()
    response = stack.http.query(TITLES, {}, user, headers=headers or None)
    assert response.status_code == 200, response.text
    return response.json()["data"]


def test_a_replica_query_sees_a_write_only_after_the_standby_replays_it(
    replica_stack: Any, paused_replay: Any
) -> None:
    stack = replica_stack(max_lag=60)
    create(stack, "first")
    stack.wait_for_replica()
    with paused_replay():
        position = create(stack, "second")
        before = served("replica")
        # The other admin's read is the standby's: the second note is not there yet.
        assert titles(stack, OTHER) == ["first"]
        assert served("replica") == before + 1
        # The writer hands its position back and reads its own write: from the primary.
        behind = served("primary", "behind_caller")
        assert titles(stack, ADMIN, **{READ_AFTER_HEADER: position}) == ["first", "second"]
        assert served("primary", "behind_caller") == behind + 1
    stack.wait_for_replica()
    # Replayed: the standby serves both, the writer's position included.
    before = served("replica")
    assert titles(stack, OTHER) == ["first", "second"]
    assert titles(stack, ADMIN, **{READ_AFTER_HEADER: position}) == ["first", "second"]
    assert served("replica") == before + 2


def test_the_cookie_of_a_write_keeps_a_browser_on_its_own_writes(
    replica_stack: Any, paused_replay: Any
) -> None:
    stack = replica_stack(max_lag=60)
    with paused_replay():
        response = stack.http.write(CREATE, {"title": "mine"}, ADMIN)
        # Quoted, as Python's cookies quote a "/"; the server reads it back unquoted.
        position = response.headers[READ_AFTER_HEADER]
        assert response.cookies[READ_AFTER_COOKIE] == f'"{position}"'
        cookie = response.headers["set-cookie"]
        assert "HttpOnly" in cookie and "Max-Age=61" in cookie
        # The client sends the cookie back by itself.
        answer = stack.http.query(TITLES, {}, ADMIN)
        assert answer.json()["data"] == ["mine"]
        assert titles(stack, OTHER) == []


def test_a_batch_answers_its_position_too(replica_stack: Any, paused_replay: Any) -> None:
    stack = replica_stack(max_lag=60)
    with paused_replay():
        response = stack.http.batch([(CREATE, {"title": "a"}), (CREATE, {"title": "b"})], ADMIN)
        assert response.status_code == 200, response.text
        position = response.headers[READ_AFTER_HEADER]
        assert titles(stack, ADMIN, **{READ_AFTER_HEADER: position}) == ["a", "b"]
        before = served_all()
        assert titles(stack, OTHER) == [], f"served by {served_since(before)}"


def test_the_standard_list_and_detail_of_a_crud_declared_replica_read_the_standby(
    replica_stack: Any, paused_replay: Any
) -> None:
    stack = replica_stack(max_lag=60)
    with paused_replay():
        response = stack.http.write(CREATE, {"title": "new"}, ADMIN)
        row_id = response.json()["data"]["id"]
        stack.http.client.cookies.clear()
        listed = stack.http.query("notes:query:note:list", {}, OTHER).json()["data"]
        assert listed["rows"] == []
        detail = stack.http.query("notes:query:note:detail", {"id": row_id}, OTHER)
        assert detail.status_code == 404
        own = stack.http.query(
            "notes:query:note:detail",
            {"id": row_id},
            ADMIN,
            headers={READ_AFTER_HEADER: response.headers[READ_AFTER_HEADER]},
        )
        assert own.json()["data"]["title"] == "new"
    declared = {h.qn for h in stack.registry.handlers if h.replica and ":note:" in h.qn}
    assert declared == {"notes:query:note:list", "notes:query:note:detail"}


def test_a_personal_value_read_from_the_standby_is_decrypted_there(replica_stack: Any) -> None:
    stack = replica_stack(max_lag=60)
    created = stack.http.write("notes:write:contact:create", {"email": "ada@example.com"}, ADMIN)
    row_id = created.json()["data"]["id"]
    stack.wait_for_replica()
    before = served("replica")
    stack.http.client.cookies.clear()
    detail = stack.http.query("notes:query:contact:detail", {"id": row_id}, OTHER)
    assert detail.json()["data"]["email"] == "ada@example.com"
    assert served("replica") == before + 1


def test_a_standby_lagging_more_than_the_limit_is_bypassed(
    replica_stack: Any, paused_replay: Any
) -> None:
    stack = replica_stack(max_lag=0.5)
    stack.wait_for_replica()
    with paused_replay():
        create(stack, "late")
        # Its last replayed transaction ages past the limit while the write waits in its log.
        time.sleep(1.5)
        lagging = served("primary", "lagging")
        assert titles(stack, OTHER) == ["late"]
        assert served("primary", "lagging") == lagging + 1


def test_reads_that_are_not_declared_or_not_over_http_stay_on_the_primary(
    replica_stack: Any, paused_replay: Any
) -> None:
    stack = replica_stack(max_lag=60)
    with paused_replay():
        create(stack, "fresh")
        before = served("replica")
        # A query not declared replica=True.
        primary = stack.http.query("notes:query:titles-primary", {}, OTHER)
        assert primary.json()["data"] == ["fresh"]
        # A call of the service without a caller's position: what jobs, consumers, MCP and
        # the CLI make. They run because of a write, and must see it.
        assert stack.service.dispatch_query(TITLES, {}, OTHER) == ["fresh"]
        # A write that reads through the replica query sees its own row, in its transaction.
        response = stack.http.write("notes:write:create-and-count", {"title": "more"}, OTHER)
        assert response.json()["data"] == 2
        assert served("replica") == before


def test_a_standby_that_does_not_answer_is_bypassed(
    asanoha_stack: Any, caplog: pytest.LogCaptureFixture
) -> None:
    from tests.integration.replica.conftest import notes

    # Nothing listens on port 1: connecting is refused at once.
    dead = "postgresql://postgres@127.0.0.1:1/nothing"
    stack = asanoha_stack(features=[notes], settings={"read_database_url": dead})
    create(stack, "kept")
    unavailable = served("primary", "unavailable")
    with caplog.at_level("WARNING", logger="asanoha.replica"):
        assert titles(stack, OTHER) == ["kept"]
        assert titles(stack, OTHER) == ["kept"]
    assert served("primary", "unavailable") == unavailable + 2
    # Said once, then left alone for a while instead of paying a refused connect each call.
    warnings = [r for r in caplog.records if "does not answer" in r.getMessage()]
    assert len(warnings) == 1


def test_a_malformed_position_answers_400_and_names_where_it_came_from(
    replica_stack: Any,
) -> None:
    stack = replica_stack()
    stack.http.client.cookies.clear()
    response = stack.http.query(TITLES, {}, ADMIN, headers={READ_AFTER_HEADER: "yesterday"})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["reason"] == "read_after_invalid"
    assert error["details"] == {"field": READ_AFTER_HEADER, "value": "yesterday"}
    stack.http.client.cookies.set(READ_AFTER_COOKIE, "0/zz")
    response = stack.http.query(TITLES, {}, ADMIN)
    assert response.status_code == 400
    assert response.json()["error"]["details"]["field"] == READ_AFTER_COOKIE


def test_replica_takes_a_boolean_and_only_queries_take_it() -> None:
    feature = Feature("bad-replica")
    with pytest.raises(DefinitionError, match=r"bad-replica:query:q: replica= takes True"):

        @feature.query_handler("q", replica="yes")  # type: ignore[arg-type]
        def q(payload: Empty, ctx: QueryContext) -> None: ...

    with pytest.raises(TypeError, match="replica"):
        feature.write_handler("w", replica=True)  # type: ignore[call-arg]
    with pytest.raises(DefinitionError, match=r"crud 'note': replica= takes True"):
        feature.crud("note", note, replica=1)  # type: ignore[arg-type]


def test_a_replica_needs_postgres_on_both_sides(tmp_path: Any) -> None:
    from tests.integration.replica.conftest import notes

    settings = Settings(
        database_url=f"sqlite+pysqlite:///{tmp_path / 'db.sqlite3'}",
        read_database_url="postgresql://postgres@127.0.0.1:5433/postgres",
        development=True,
    )
    with pytest.raises(ValueError, match="ASANOHA_READ_DATABASE_URL needs PostgreSQL"):
        App([notes], settings)
