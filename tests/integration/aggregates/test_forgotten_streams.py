"""A stream closed by a ``forgotten`` event is pruned at once, whatever its age: archived
first (sealed), its snapshots with it, other streams untouched, and nothing while a consumer
has not handled its events; a rebuild afterwards brings back every other row and not the
forgotten one."""

from __future__ import annotations

import gzip
import logging
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from sqlalchemy import select

from asanoha import Access, Agent, ConflictError, Entity, Feature, StoredEvent, WriteContext, fields
from asanoha.handlers import personal_data
from asanoha.platform.store.rebuild import rebuild_guarded
from asanoha.platform.store.retention import forget_markers, prune_events, restore_archive
from asanoha.workers.cron_tasks import prune_declared_events
from tests.integration.aggregates.conftest import ADMIN, OFFICER, TENANT

EMAIL = "ada.lovelace@example.org"
member = Entity(
    table="fs_members",
    fields={
        "name": fields.text(required=True, personal=False, reason="fixture"),
        "email": fields.text(personal="self"),
    },
    soft_delete=True,
)
club = Feature("club")
club.crud("member", member, write=Access(roles=["Admin"]), read=Access(roles=["Admin"]))


class RowId(BaseModel):
    id: uuid.UUID


class Visit(BaseModel):
    id: uuid.UUID
    room: str


visited = club.event("visited", Visit)


@club.write_handler("forget-member", access=Access(roles=["Admin"]), agent=Agent(risk="high"))
def forget_member(payload: RowId, ctx: WriteContext) -> Any:
    return ctx.entity("member").forget(payload.id)


@club.write_handler("visit", access=Access(roles=["Admin"]))
def visit(payload: Visit, ctx: WriteContext) -> int:
    """A domain event on a member's stream (after a forget too)."""
    return ctx.append_event(visited, payload.model_dump(mode="json"), stream_id=str(payload.id)).id


@club.consumer("welcome", on=["club:event:member.created"])
def welcome(event: StoredEvent, ctx: Any) -> None:
    """Follows new members; pruning waits until it has handled them."""


@club.aggregate("member", snapshot_every=2)
def member_state(state: dict[str, Any] | None, event: StoredEvent) -> dict[str, Any]:
    """How many events a member's stream holds."""
    return {"events": (state or {"events": 0})["events"] + 1}


@pytest.fixture(params=["postgres", "sqlite"])
def stack(request: pytest.FixtureRequest, asanoha_stack: Callable[..., Any]) -> Any:
    return asanoha_stack(features=[club, personal_data.feature], database=request.param)


def join(stack: Any, name: str, updates: int = 2) -> str:
    """A member with ``updates`` updates; its id."""
    row = stack.http.write_ok("club:write:member:create", {"name": name, "email": EMAIL}, ADMIN)
    for number in range(updates):
        payload = {
            "id": row["id"],
            "version": row["version"],
            "changes": {"name": f"{name}{number}"},
        }
        row = stack.http.write_ok("club:write:member:update", payload, ADMIN)
    return str(row["id"])


def forget(stack: Any, member_id: str) -> None:
    stack.http.write_ok("club:write:forget-member", {"id": member_id}, OFFICER)


def stored(stack: Any) -> list[tuple[int, str, str]]:
    events = stack.tables.events
    query = select(events.c.id, events.c.stream_id, events.c.type).order_by(events.c.id)
    with stack.db.connect() as conn:
        return [tuple(row) for row in conn.execute(query)]  # type: ignore[misc]


def rows(stack: Any) -> list[tuple[str, str, int]]:
    table = stack.tables.entity("club:member")
    query = select(table.c.id, table.c.name, table.c.version).order_by(table.c.id)
    with stack.db.connect() as conn:
        return [(str(id_), name, version) for id_, name, version in conn.execute(query)]


def prune(stack: Any, archive: Path | None = None) -> Any:
    with stack.db.begin() as conn:
        return prune_events(
            conn, stack.tables, forgotten=forget_markers(stack.registry), archive_dir=archive
        )


def snapshot_streams(stack: Any) -> set[str]:
    table = stack.tables.snapshots
    with stack.db.connect() as conn:
        return set(conn.execute(select(table.c.stream_id)).scalars())


def load_member(stack: Any, member_id: str) -> Any:
    aggregate = stack.registry.find_aggregate("club:member")
    with stack.db.begin() as conn:
        return stack.service.aggregates.load(conn, aggregate, tenant_id=TENANT, stream_id=member_id)


def test_a_forgotten_stream_is_pruned_at_once_once_consumers_handled_it(
    stack: Any, tmp_path: Path
) -> None:
    kept, gone = join(stack, "grace"), join(stack, "ada")
    assert load_member(stack, gone).state == {"events": 3}
    forget(stack, gone)
    # Forget discarded the stream's snapshot; a load after it keeps one again.
    assert load_member(stack, gone).state == {"events": 4}
    assert gone in snapshot_streams(stack)
    before, live = stored(stack), rows(stack)
    assert [row[0] for row in live] == [kept]
    assert load_member(stack, kept).version == 3

    # The welcome consumer has not handled the member's created event: nothing is deleted,
    # nor archived.
    with stack.nothing_written(), pytest.raises(ConflictError) as refused:
        prune(stack, tmp_path)
    error = refused.value
    assert (error.http_status, error.code, error.reason) == (409, "conflict", "consumer_lag")
    assert (error.details["consumer"], error.details["position"]) == ("club:consumer:welcome", 0)
    assert stored(stack) == before and list(tmp_path.iterdir()) == []

    stack.consumers.run_once()
    result = prune(stack, tmp_path)
    assert (result.pruned, result.closed_streams) == (4, 1)
    assert stored(stack) == [event for event in before if event[1] != gone]
    assert [event[1] for event in stored(stack)] == [kept] * 3
    assert gone not in snapshot_streams(stack) and kept in snapshot_streams(stack)
    assert load_member(stack, gone).state is None
    # Archived first, as stored: the personal value stays sealed.
    assert result.archive is not None
    text = gzip.decompress(result.archive.read_bytes()).decode()
    assert len(text.splitlines()) == 4 and gone in text and EMAIL not in text
    assert prune(stack).pruned == 0

    # A rebuild brings back the member kept, not the forgotten one, and drops no row.
    entity = stack.registry.find_entity("club:member")
    rebuilt = rebuild_guarded(stack.db, stack.tables, entity)
    assert (rebuilt.replayed, rebuilt.dropped_orphans) == (3, ())
    assert rows(stack) == live
    # Restoring the archive brings the events back; their row stays forgotten.
    with stack.db.begin() as conn:
        assert restore_archive(conn, stack.tables, result.archive) == 4
    assert stored(stack) == before
    assert rebuild_guarded(stack.db, stack.tables, entity).replayed == 7
    assert rows(stack) == live


def test_a_stream_written_after_its_forget_is_not_closed(stack: Any) -> None:
    gone = join(stack, "ada", updates=0)
    forget(stack, gone)
    stack.http.write_ok("club:write:visit", {"id": gone, "room": "library"}, ADMIN)
    stack.consumers.run_once()
    before = stored(stack)
    assert [event[2] for event in before][-2:] == [
        "club:event:member.forgotten",
        "club:event:visited",
    ]
    assert prune(stack).pruned == 0
    assert stored(stack) == before


@pytest.mark.parametrize("database", ["postgres", "sqlite"])
def test_the_daily_prune_takes_forgotten_streams_and_waits_for_a_lagging_consumer(
    asanoha_stack: Callable[..., Any],
    database: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    archive = tmp_path / "archive"
    stack = asanoha_stack(
        features=[club, personal_data.feature],
        settings={"event_archive_dir": str(archive)},
        database=database,
    )
    kept, gone = join(stack, "grace", updates=1), join(stack, "ada", updates=1)
    forget(stack, gone)
    before = stored(stack)
    with caplog.at_level(logging.WARNING, logger="asanoha.cron"), stack.nothing_written():
        assert prune_declared_events(stack.app.service, stack.app.settings) == 0
    assert "club:consumer:welcome" in caplog.text
    assert stored(stack) == before and not archive.exists()

    stack.consumers.run_once()
    assert prune_declared_events(stack.app.service, stack.app.settings) == 3
    assert [event[1] for event in stored(stack)] == [kept, kept]
    (written,) = archive.iterdir()
    assert len(gzip.decompress(written.read_bytes()).decode().splitlines()) == 3
