"""Fold equals the entity table for every entity of the demo over random writes.

The demo (``asanoha.handlers.demo``) declares no aggregate: its rows are projections of their
streams. Random writes go through the service as a user sends them (notes created, jotted
down, updated, deleted and restored by editors of two tenants, index entries by the system
user), refused ones among them (a stale version, an update of a deleted note, a restore of a
live one), each checked against a small model. Then each entity's stream is folded with the
rebuild's own fold (``row_change``, in event order, from the events as a rebuild reads them)
and the result must equal the table, row for row and column for column, no row more or less;
and a rebuild beside the table must leave it as it was.

The acceptance run is 10,000 writes: ``ASANOHA_FOLD_WRITES=10000`` (per database). Without
it each database takes ``DEFAULT_WRITES`` writes, which keeps the test short on a busy machine.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from asanoha import SessionUser
from asanoha.handlers.demo.features import notes
from asanoha.platform.errors import AsanohaError
from asanoha.platform.model import EntityDef
from asanoha.platform.store.projections import projection_vault, read_entity_events, row_change
from asanoha.platform.store.rebuild import rebuild_guarded

#: Writes per database without ``ASANOHA_FOLD_WRITES``.
DEFAULT_WRITES = 400
WRITES = int(os.environ.get("ASANOHA_FOLD_WRITES", DEFAULT_WRITES))
#: Writes per hypothesis example: the examples together make ``WRITES``.
PER_EXAMPLE = 40
#: Two editors in each of two tenants: a note is changed by others than its author.
EDITORS = [
    SessionUser.of(f"editor-{tenant}{number}", f"tenant-{tenant}", ["Editor"])
    for tenant in "ab"
    for number in (1, 2)
]
ENTITIES = ("notes:note", "notes:index-entry")
TEXT = st.text(alphabet="abc xyzé", min_size=1, max_size=16)
WRITE = st.tuples(
    st.sampled_from(
        ["create", "quick-note", "update", "stale-update", "delete", "restore", "index-entry"]
    ),
    st.integers(0, len(EDITORS) - 1),
    st.integers(0, 10_000),
    TEXT,
    st.one_of(st.none(), TEXT),
)


@dataclass
class Note:
    """What the model knows of a note."""

    id: str
    tenant: str
    version: int
    deleted: bool = False


@dataclass
class Model:
    """The notes one example wrote (the stack keeps those of the examples before)."""

    notes: list[Note] = field(default_factory=list)


@dataclass
class Counts:
    """Writes made and refused, over every example."""

    writes: int = 0
    refused: int = 0


def dispatch(stack: Any, qn: str, payload: dict[str, Any], user: SessionUser) -> Any:
    return stack.service.dispatch_write(qn, payload, user)


def refused(stack: Any, qn: str, payload: dict[str, Any], user: SessionUser, reason: str) -> None:
    """The write is refused for ``reason``."""
    with pytest.raises(AsanohaError) as error:
        dispatch(stack, qn, payload, user)
    assert error.value.reason == reason, error.value


def play(
    stack: Any, model: Model, counts: Counts, write: tuple[str, int, int, str, str | None]
) -> None:
    """One write as the model says it ends."""
    verb, editor, pick, text, body = write
    user = EDITORS[editor]
    mine = [note for note in model.notes if note.tenant == user.tenant_id]
    note = mine[pick % len(mine)] if mine else None
    counts.writes += 1
    if verb in ("create", "quick-note") or (note is None and verb != "index-entry"):
        qn = "notes:write:quick-note" if verb == "quick-note" else "notes:write:note:create"
        row = dispatch(stack, qn, {"title": text, "body": body}, user)
        model.notes.append(Note(str(row["id"]), user.tenant_id, int(row["version"])))
    elif verb == "index-entry":
        payload = {"title": text, "words": pick}
        dispatch(
            stack, "notes:write:index-entry:create", payload, SessionUser.system(user.tenant_id)
        )
    elif verb in ("update", "stale-update"):
        assert note is not None
        changes = {"title": text, "body": body}
        stale = verb == "stale-update"
        # A version the note had before, or (at its first) one it never had.
        sent = note.version + (0 if not stale else -1 if note.version > 1 else 1)
        payload = {"id": note.id, "version": sent, "changes": changes}
        if note.deleted or stale:
            counts.refused += 1
            reason = "entity_deleted" if note.deleted else "version_conflict"
            refused(stack, "notes:write:note:update", payload, user, reason)
        else:
            note.version = int(dispatch(stack, "notes:write:note:update", payload, user)["version"])
    else:
        assert note is not None
        if note.deleted == (verb == "delete"):
            counts.refused += 1
            reason = "entity_deleted" if note.deleted else "entity_not_deleted"
            refused(stack, f"notes:write:note:{verb}", {"id": note.id}, user, reason)
        else:
            dispatch(stack, f"notes:write:note:{verb}", {"id": note.id}, user)
            note.deleted, note.version = verb == "delete", note.version + 1


def folded_rows(stack: Any, entity_def: EntityDef) -> dict[tuple[str, uuid.UUID], dict[str, Any]]:
    """Each stream of the entity folded by the rebuild's ``row_change``: the rows it gives."""
    rows: dict[tuple[str, uuid.UUID], dict[str, Any] | None] = {}
    with stack.db.connect() as conn:
        vault = projection_vault(conn, entity_def)
        after = 0
        while events := read_entity_events(conn, stack.tables, entity_def, after=after, limit=2000):
            for event in events:
                change = row_change(entity_def, event, vault)
                key = (change.tenant_id, change.row_id)
                row = rows.get(key)
                if change.kind == "insert":
                    rows[key] = dict(change.values)
                elif change.kind == "update" and row is not None:
                    row.update(change.values)
                elif change.kind == "delete":
                    rows[key] = None
            after = events[-1].id
    return {key: row for key, row in rows.items() if row is not None}


def table_rows(stack: Any, entity_def: EntityDef) -> dict[tuple[str, uuid.UUID], dict[str, Any]]:
    table = stack.tables.entity(entity_def.key)
    with stack.db.connect() as conn:
        found = conn.execute(select(table)).mappings()
        return {(row["tenant_id"], row["id"]): dict(row) for row in found}


def assert_folds_equal_tables(stack: Any) -> None:
    for key in ENTITIES:
        entity_def = stack.registry.find_entity(key)
        assert entity_def is not None
        table, folded = table_rows(stack, entity_def), folded_rows(stack, entity_def)
        assert set(table) == set(folded), key
        for row_key, row in table.items():
            assert row == folded[row_key], (key, row_key)


def assert_model(stack: Any, model: Model) -> None:
    """Each note of the model is in its tenant's table at its version, deleted or not."""
    table = stack.tables.entity("notes:note")
    with stack.db.connect() as conn:
        found = {
            str(id_): (tenant, version, is_deleted)
            for id_, tenant, version, is_deleted in conn.execute(
                select(table.c.id, table.c.tenant_id, table.c.version, table.c.is_deleted)
            )
        }
    for note in model.notes:
        assert found[note.id] == (note.tenant, note.version, note.deleted)


@pytest.fixture(params=["postgres", "sqlite"])
def demo_stack(request: pytest.FixtureRequest, asanoha_stack: Callable[..., Any]) -> Any:
    return asanoha_stack(features=[notes], database=request.param)


def test_fold_equals_the_entity_table_for_every_entity_of_the_demo(demo_stack: Any) -> None:
    stack = demo_stack
    counts = Counts()

    @settings(
        max_examples=max(1, WRITES // PER_EXAMPLE),
        deadline=None,
        database=None,
        # No shrinking: a failing example is reported whole (40 writes), within seconds.
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(writes=st.lists(WRITE, min_size=PER_EXAMPLE, max_size=PER_EXAMPLE))
    def random_writes(writes: list[tuple[str, int, int, str, str | None]]) -> None:
        # The examples share the stack: each adds its notes to the streams already there.
        model = Model()
        for write in writes:
            play(stack, model, counts, write)
        assert_model(stack, model)
        assert_folds_equal_tables(stack)

    random_writes()
    assert counts.writes >= WRITES - WRITES % PER_EXAMPLE
    assert 0 < counts.refused < counts.writes
    # A rebuild (its batches merged per row) leaves every table as the live writes left it.
    for key in ENTITIES:
        entity_def = stack.registry.find_entity(key)
        assert entity_def is not None
        before = table_rows(stack, entity_def)
        rebuild_guarded(stack.db, stack.tables, entity_def, batch=97)
        assert table_rows(stack, entity_def) == before
