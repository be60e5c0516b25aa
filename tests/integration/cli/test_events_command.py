"""``asanoha events prune`` and ``restore``, and ``asanoha projections rebuild`` of a
declared projection, as an operator runs them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.integration.cli.conftest import Project, project

__all__ = ["project"]

LEDGER = """
from typing import Any

from pydantic import BaseModel
from sqlalchemy import Column, Integer, MetaData, String, Table, insert, update

from asanoha import Access, App, Feature, StoredEvent, WriteContext


class Moved(BaseModel):
    account: str
    amount: int


feature = Feature("ledger")
moved = feature.event("moved", Moved)
totals = Table(
    "ledger_totals",
    MetaData(),
    Column("account", String(64), primary_key=True),
    Column("balance", Integer, nullable=False),
)


@feature.projection("totals", table=totals, on=[moved.qn])
def project_totals(event: StoredEvent, target: Any) -> None:
    table, account = target.table, event.stream_id
    amount = event.payload["amount"]
    done = target.execute(
        update(table).where(table.c.account == account).values(balance=table.c.balance + amount)
    )
    if done.rowcount == 0:
        target.execute(insert(table).values(account=account, balance=amount))


@feature.write_handler("move", access=Access(roles=["Admin"]))
def move(payload: Moved, ctx: WriteContext) -> int:
    return ctx.append_event(moved, payload.model_dump(), stream_id=payload.account).id


app = App([feature])
"""
MOVE_AND_AGE = """
import datetime as dt
from sqlalchemy import update
from asanoha import SessionUser
import ledger
admin = SessionUser.of("u-1", "acme", ["Admin"])
for account, amount in (("a", 5), ("b", 7), ("a", 1)):
    ledger.app.service.dispatch_write("ledger:write:move", {"account": account, "amount": amount}, admin)
events = ledger.app.service.tables.events
with ledger.app.database.begin() as conn:
    old = dt.datetime.now(dt.UTC) - dt.timedelta(days=400)
    conn.execute(update(events).where(events.c.stream_id == "a").values(created_at=old))
"""
TOTALS = """
from sqlalchemy import select, update
import ledger, sys
with ledger.app.database.begin() as conn:
    if sys.argv[1:] == ["spoil"]:
        conn.execute(update(ledger.totals).values(balance=0))
    print(sorted(tuple(row) for row in conn.execute(select(ledger.totals))))
"""


def python(project: Project, code: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=project.folder,
        env=project.env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_prune_archive_restore_and_rebuild_a_declared_projection(
    project: Project, tmp_path: Path
) -> None:
    (project.folder / "ledger.py").write_text(LEDGER, encoding="utf-8")
    assert project.run("migrate", "--app", "ledger:app").returncode == 0
    python(project, MOVE_AND_AGE)
    assert python(project, TOTALS) == "[('a', 6), ('b', 7)]"

    assert python(project, TOTALS, "spoil") == "[('a', 0), ('b', 0)]"
    rebuilt = project.run(
        "projections", "rebuild", "ledger:projection:totals", "--app", "ledger:app"
    )
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert "rebuilt ledger:projection:totals: 3 events" in rebuilt.stdout
    assert python(project, TOTALS) == "[('a', 6), ('b', 7)]"

    wrong = project.run("events", "prune", "--older-than", "1y", "--app", "ledger:app")
    assert wrong.returncode == 2 and "is no age" in wrong.stderr
    pruned = project.run(
        "events", "prune", "--older-than", "365d", "--archive", str(tmp_path), "--app", "ledger:app"
    )
    assert pruned.returncode == 0, pruned.stderr
    assert "pruned 2 event(s) up to position 3; archived to " in pruned.stdout
    [archive] = tmp_path.glob("events-*.jsonl.gz")
    restored = project.run("events", "restore", str(archive), "--app", "ledger:app")
    assert restored.returncode == 0, restored.stderr
    assert f"restored 2 event(s) from {archive}" in restored.stdout


CLUB = """
import uuid
from typing import Any

from pydantic import BaseModel

from asanoha import Access, Agent, App, Entity, Feature, WriteContext, fields

member = Entity(
    table="club_members",
    fields={"name": fields.text(required=True, personal=False, reason="a test")},
)
feature = Feature("club")
feature.crud("member", member, write=Access(roles=["Admin"]), read=Access(roles=["Admin"]))


class RowId(BaseModel):
    id: uuid.UUID


@feature.write_handler("forget", access=Access(roles=["Admin"]), agent=Agent(risk="high"))
def forget(payload: RowId, ctx: WriteContext) -> Any:
    return ctx.entity("member").forget(payload.id)


app = App([feature])
"""
JOIN_AND_FORGET = """
from asanoha import SessionUser
import club
admin = SessionUser.of("u-1", "acme", ["Admin"])
write = club.app.service.dispatch_write
write("club:write:member:create", {"name": "Kept"}, admin)
gone = write("club:write:member:create", {"name": "Gone"}, admin)
changes = {"name": "Gone again"}
write("club:write:member:update", {"id": str(gone["id"]), "version": 1, "changes": changes}, admin)
write("club:write:forget", {"id": str(gone["id"])}, admin)
"""
STREAMS = """
from sqlalchemy import func, select
import club
events = club.app.service.tables.events
with club.app.database.begin() as conn:
    query = select(events.c.type, func.count()).group_by(events.c.type)
    print(sorted(tuple(row) for row in conn.execute(query)))
"""


def test_prune_takes_a_stream_closed_by_forget_at_once(project: Project) -> None:
    (project.folder / "club.py").write_text(CLUB, encoding="utf-8")
    assert project.run("migrate", "--app", "club:app").returncode == 0
    python(project, JOIN_AND_FORGET)
    before = python(project, STREAMS)
    assert "club:event:member.forgotten" in before
    # Nothing is old: only the forgotten member's stream (created, updated, forgotten) goes.
    pruned = project.run("events", "prune", "--older-than", "365d", "--app", "club:app")
    assert pruned.returncode == 0, pruned.stderr
    assert "pruned 3 event(s)" in pruned.stdout
    assert "(1 stream(s) closed by forget)" in pruned.stdout
    assert python(project, STREAMS) == "[('club:event:member.created', 1)]"
