"""The read-replica suite: a stack whose ``read_database_url`` is the local hot standby
(``scripts/replica.sh``), and a way to hold the standby's replay still."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import pytest
from pydantic import BaseModel
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from asanoha import Access, Entity, Feature, QueryContext, WriteContext, fields
from asanoha.testing import Stack
from asanoha.testing.databases import replica_server_url
from asanoha.testing.plugin import StackFactory
from tests.standby import standby_to_ourselves

ADMIN = Access(roles=["Admin"])

note = Entity(
    table="replica_notes",
    fields={"title": fields.text(required=True, personal=False, reason="fixture")},
)
# A personal field: the standby holds its ciphertext, and the read decrypts it there too.
contact = Entity(
    table="replica_contacts",
    fields={"email": fields.text(personal="self")},
)
notes = Feature("notes")
notes.crud("note", note, write=ADMIN, read=ADMIN, replica=True)
notes.crud("contact", contact, write=ADMIN, read=ADMIN, replica=True)


class Empty(BaseModel):
    pass


class Title(BaseModel):
    title: str


@notes.query_handler("titles", access=ADMIN, replica=True)
def titles(payload: Empty, ctx: QueryContext) -> list[str]:
    """Every note's title, oldest first; may read the replica."""
    rows = ctx.entity("note").list(limit=500, sort=["created_at"])["rows"]
    return [row["title"] for row in rows]


@notes.query_handler("titles-primary", access=ADMIN)
def titles_primary(payload: Empty, ctx: QueryContext) -> list[str]:
    """The same, not declared replica=True."""
    return titles(payload, ctx)


@notes.write_handler("create-and-count", access=ADMIN)
def create_and_count(payload: Title, ctx: WriteContext) -> int:
    """Create a note, then count the titles through the replica query, inside the write."""
    ctx.entity("note").create({"title": payload.title})
    return len(ctx.query("notes:query:titles", {}))


Factory = Callable[..., Stack]


@pytest.fixture
def replica_stack(asanoha_stack: StackFactory) -> Factory:
    """``replica_stack(max_lag=60)``: a stack of ``notes`` reading the hot standby."""

    def make(max_lag: float = 60.0, **settings: Any) -> Stack:
        overrides = {"replica_max_lag": max_lag, **settings}
        return asanoha_stack(features=[notes], settings=overrides, replica=True)

    return make


def _wait_until_paused(conn: Any) -> None:
    # A pause is only requested at first: the standby may replay the record it is on (and,
    # under load, a few more) before it stops. A test that writes before that point would
    # find its write already on the standby.
    deadline = time.monotonic() + 30
    state = ""
    while time.monotonic() < deadline:
        state = conn.execute(text("SELECT pg_get_wal_replay_pause_state()")).scalar_one()
        if state == "paused":
            return
        time.sleep(0.02)
    raise AssertionError(f"the standby's replay did not pause within 30 s (state {state!r})")


@contextmanager
def _paused() -> Iterator[None]:
    engine = create_engine(replica_server_url(), isolation_level="AUTOCOMMIT", poolclass=NullPool)
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT pg_wal_replay_pause()"))
            _wait_until_paused(conn)
        try:
            yield
        finally:
            with engine.connect() as conn:
                conn.execute(text("SELECT pg_wal_replay_resume()"))
    finally:
        engine.dispose()


@pytest.fixture(autouse=True)
def standby_lock() -> Iterator[None]:
    """Every test here reads the standby: no other suite pauses or stops it meanwhile."""
    with standby_to_ourselves():
        yield


@pytest.fixture
def paused_replay() -> Callable[[], AbstractContextManager[None]]:
    """``with paused_replay():`` the standby receives the primary's log but replays none of
    it; replay resumes at the end of the block, and after a failed test."""
    return _paused
