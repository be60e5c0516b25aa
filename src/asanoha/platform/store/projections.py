"""Entity rows as projections of their streams.

``row_change`` is the only code that says what an event does to its row: the live write path
writes the change of the event it just appended (``apply_entity_event``), and
``rebuild_projection`` replays a whole table through it, merging the changes of a batch.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import uuid
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import Connection, Table, bindparam, delete, insert, select, update

from asanoha.platform.errors import ConflictError, Reasons
from asanoha.platform.model import Entity, EntityDef, Registry
from asanoha.platform.model.feature import ENTITY_VERBS
from asanoha.platform.model.fields import Field
from asanoha.platform.model.kept import kept
from asanoha.platform.personal import vault as personal_vault
from asanoha.platform.personal.blind_index import blind_column, blind_indexed_fields
from asanoha.platform.store.events import EVENT_COLUMNS, StoredEvent
from asanoha.platform.store.inserts import execute_insert
from asanoha.platform.store.tables import Tables

Row = dict[str, Any]


#: Values that are JSON as they are (most field values): returned without the checks below.
_AS_JSON = frozenset({str, int, float, bool, type(None)})


def encode_value(value: Any) -> Any:
    """A field value as JSON for an event payload."""
    if type(value) in _AS_JSON:
        return value
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal | uuid.UUID):
        return str(value)
    # Embedded objects and their lists hold values of these kinds too.
    if isinstance(value, dict):
        return {key: encode_value(item) for key, item in value.items()}
    if isinstance(value, list):
        return [encode_value(item) for item in value]
    return value


def decode_value(declared: Field, value: Any) -> Any:
    """A field value from an event payload, as the column stores it."""
    if value is None:
        return None
    if declared.kind == "timestamp":
        return dt.datetime.fromisoformat(value)
    if declared.kind == "date":
        return dt.date.fromisoformat(value)
    if declared.kind == "decimal":
        return decimal.Decimal(value)
    if declared.kind in ("reference", "file", "image"):
        return uuid.UUID(value)
    return value


def encode_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """Every value of ``values`` encoded for an event payload."""
    return {name: encode_value(value) for name, value in values.items()}


def _decode_all(entity_def: EntityDef, values: Mapping[str, Any]) -> dict[str, Any]:
    declared = entity_def.entity.fields
    # A personal value is stored as the event holds it: sealed text (readers open it), or
    # without a master key its JSON (a personal column is text whatever the field's kind).
    return {
        name: (
            _personal_text(value)
            if declared[name].is_personal
            else decode_value(declared[name], value)
        )
        for name, value in values.items()
        if name in declared
    }


def _default_or_none(declared: Field) -> Any:
    if not declared.has_default or callable(declared.default) or declared.is_personal:
        return None
    return declared.default


def _unwritten_columns(entity: Entity) -> dict[str, Any]:
    """What a created row holds in the columns its event does not set: a field declared
    after the event was written takes its default, as the revision that added its column
    backfilled it (see migrations.backfill); a blind index nothing is sealed for is empty.
    Made once per entity: every create asks."""

    def build() -> dict[str, Any]:
        columns = {name: _default_or_none(declared) for name, declared in entity.fields.items()}
        return columns | {blind_column(name): None for name in blind_indexed_fields(entity)}

    return kept(entity, "unwritten_columns", build)


def _personal_text(value: Any) -> Any:
    return value if value is None or isinstance(value, str) else json.dumps(value)


def projection_vault(conn: Connection, entity_def: EntityDef) -> personal_vault.Vault | None:
    """The vault ``row_change`` computes the entity's blind indexes with (``None`` for an
    entity without any)."""
    if not blind_indexed_fields(entity_def.entity):
        return None
    return personal_vault.vault_of(conn)


def _blind_columns(
    vault: personal_vault.Vault | None,
    entity_def: EntityDef,
    tenant_id: str,
    values: Mapping[str, Any],
) -> dict[str, Any]:
    """The blind index columns of ``values`` (see ``Vault.blind_columns``). An index is
    computed here, where the row is written, from the opened value, never read from the
    event: a ``blind`` map that older events carry is ignored."""
    if vault is None:
        indexed = blind_indexed_fields(entity_def.entity)
        return {blind_column(name): None for name in indexed if name in values}
    return vault.blind_columns(entity_def.entity, entity_def.key, tenant_id, values)


@dataclass(frozen=True)
class RowChange:
    """What one entity event does to its row: insert it, set some columns, or delete it."""

    kind: Literal["insert", "update", "delete"]
    row_id: uuid.UUID
    tenant_id: str
    values: Row


def entity_verb(entity_def: EntityDef, event_type: str) -> str | None:
    """The verb of ``event_type`` when it is one of the entity's own events, else ``None``."""
    prefix = entity_def.event_qn("")
    if not event_type.startswith(prefix):
        return None
    verb = event_type[len(prefix) :]
    return verb if verb in ENTITY_VERBS else None


def entity_of_event(registry: Registry, event_type: str) -> EntityDef | None:
    """The entity whose own event ``event_type`` is (``feature:event:<entity>.<verb>``)."""
    feature, _, rest = event_type.partition(":event:")
    name, dot, verb = rest.rpartition(".")
    if not dot or verb not in ENTITY_VERBS:
        return None
    return registry.find_entity(f"{feature}:{name}")


def stream_entity(
    conn: Connection, tables: Tables, registry: Registry, tenant_id: str, stream_id: str
) -> EntityDef | None:
    """The entity whose row the stream projects to: the one whose ``created`` event opened it."""
    events = tables.events
    query = select(events.c.type).where(
        events.c.tenant_id == tenant_id, events.c.stream_id == stream_id, events.c.version == 1
    )
    first = conn.execute(query).scalar_one_or_none()
    if first is None:
        return None
    entity_def = entity_of_event(registry, first)
    if entity_def is None or entity_verb(entity_def, first) != "created":
        return None
    return entity_def


def lock_entity_row(
    conn: Connection, tables: Tables, entity_def: EntityDef, tenant_id: str, stream_id: str
) -> int | None:
    """Lock the row of an entity stream until the transaction ends; return its version, or
    ``None`` when the row is gone (deleted or forgotten)."""
    table = tables.entity(entity_def.key)
    try:
        row_id = uuid.UUID(stream_id)
    except ValueError:
        return None
    query = (
        select(table.c.version)
        .where(table.c.tenant_id == tenant_id, table.c.id == row_id)
        .with_for_update()
    )
    version = conn.execute(query).scalar_one_or_none()
    return None if version is None else int(version)


def row_change(
    entity_def: EntityDef, event: StoredEvent, vault: personal_vault.Vault | None = None
) -> RowChange:
    """The row change ``event`` describes (no database access but ``vault``'s, for a key it
    has not read yet: the blind indexes are computed from the opened values).

    Only the entity's own event types change fields. Any other event on the stream (a domain
    event appended with the row's id as its stream) moves the row's version and nothing else:
    a row always carries its stream's version, the version a writer must send.
    """
    verb = entity_verb(entity_def, event.type)
    row_id = uuid.UUID(event.stream_id)
    if verb is None:
        return RowChange("update", row_id, event.tenant_id, {"version": event.version})
    stamp = {
        "version": event.version,
        "modified_at": event.created_at,
        "modified_by": event.created_by,
    }
    soft_delete = entity_def.entity.soft_delete
    if verb == "created":
        data = event.payload.get("data", {})
        row: Row = {
            "id": row_id,
            "tenant_id": event.tenant_id,
            "created_at": event.created_at,
            "created_by": event.created_by,
            **stamp,
            **_unwritten_columns(entity_def.entity),
            **_decode_all(entity_def, data),
            **_blind_columns(vault, entity_def, event.tenant_id, data),
        }
        if soft_delete:
            row |= {"is_deleted": False, "deleted_at": None, "deleted_by": None}
        return RowChange("insert", row_id, event.tenant_id, row)
    if verb == "updated":
        changed = event.payload.get("changes", {})
        changes = _decode_all(entity_def, changed)
        changes |= _blind_columns(vault, entity_def, event.tenant_id, changed)
        return RowChange("update", row_id, event.tenant_id, stamp | changes)
    if verb == "deleted" and soft_delete:
        deleted = {
            "is_deleted": True,
            "deleted_at": event.created_at,
            "deleted_by": event.created_by,
        }
        return RowChange("update", row_id, event.tenant_id, stamp | deleted)
    if verb == "restored":
        restored = {"is_deleted": False, "deleted_at": None, "deleted_by": None}
        return RowChange("update", row_id, event.tenant_id, stamp | restored)
    # A hard delete, or forgotten.
    return RowChange("delete", row_id, event.tenant_id, {})


def apply_entity_event(
    conn: Connection,
    tables: Tables,
    entity_def: EntityDef,
    event: StoredEvent,
    vault: personal_vault.Vault | None = None,
) -> Row | None:
    """Write the row change that ``event`` describes; return the row, or ``None`` once gone.
    ``vault``: the transaction's (looked up when not given)."""
    if vault is None:
        vault = projection_vault(conn, entity_def)
    change = row_change(entity_def, event, vault)
    return write_row_change(conn, tables.entity(entity_def.key), change)


def write_row_change(conn: Connection, table: Table, change: RowChange) -> Row | None:
    """Write ``change`` to ``table`` (the entity's table or a copy of it); return the row, or
    ``None`` once gone."""
    if change.kind == "insert":
        execute_insert(conn, table, change.values)
        return change.values
    if change.kind == "update":
        statement = (
            update(table)
            .where(table.c.id == change.row_id, table.c.tenant_id == change.tenant_id)
            .values(change.values)
            .returning(*table.c)
        )
        found = conn.execute(statement).mappings().first()
        return dict(found) if found is not None else None
    conn.execute(
        delete(table).where(table.c.id == change.row_id, table.c.tenant_id == change.tenant_id)
    )
    return None


def rebuild_projection(
    conn: Connection,
    tables: Tables,
    entity_def: EntityDef,
    batch: int = 5000,
    *,
    drop_orphans: bool = False,
) -> int:
    """Empty the entity's table and replay every event of its streams; return the event count.

    Every event of an entity stream carries the entity's stream type, domain events appended
    to it included (they move the row's version; see ``row_change``). A row of the table that
    the replay does not bring back (no events) stops the rebuild with a ``ConflictError``
    (``projection_orphan_rows``, its id in ``details.ids``) unless ``drop_orphans=True``; the
    caller's transaction then rolls back. ``store.rebuild`` rebuilds beside live writes.
    """
    table = tables.entity(entity_def.key)
    before = row_keys(conn, table)
    conn.execute(delete(table))
    position, replayed = 0, 0
    while True:
        found = read_entity_events(conn, tables, entity_def, after=position, limit=batch)
        if not found:
            break
        replay_events(conn, table, entity_def, found)
        position = found[-1].id
        replayed += len(found)
    orphans = before - row_keys(conn, table)
    if orphans and not drop_orphans:
        raise orphan_rows_error(entity_def, orphans)
    return replayed


def read_entity_events(
    conn: Connection,
    tables: Tables,
    entity_def: EntityDef,
    *,
    after: int,
    limit: int,
    tenant_id: str | None = None,
) -> list[StoredEvent]:
    """The next ``limit`` events of the entity's streams after position ``after`` (of one
    tenant, or all), in the newest shape of their type."""
    events = tables.events
    query = select(*(events.c[name] for name in _REPLAY_COLUMNS)).where(
        events.c.stream_type == entity_def.key, events.c.id > after
    )
    if tenant_id is not None:
        query = query.where(events.c.tenant_id == tenant_id)
    rows = conn.execute(query.order_by(events.c.id).limit(limit)).all()
    return tables.upcasters.upcast_all([_replayed_event(row) for row in rows])


def replay_events(
    conn: Connection, table: Table, entity_def: EntityDef, events: list[StoredEvent]
) -> None:
    """Write the row changes of ``events`` (in position order) to ``table``.

    The changes are folded into one change per row (the changes ``row_change`` gives the live
    path, merged in order) and written with one statement per kind, so that a replay costs a
    few statements per batch rather than one per event.
    """
    vault = projection_vault(conn, entity_def)
    if vault is not None:
        # The keys of the batch's subjects in one query.
        vault.prepare([event.payload for event in events])
    if entity_def.entity.unique:
        # An entity with unique indexes replays event by event: merged changes of several
        # rows could pass through a state the live sequence never had and trip an index.
        for event in events:
            write_row_change(conn, table, row_change(entity_def, event, vault))
    else:
        _write_merged(conn, table, [row_change(entity_def, event, vault) for event in events])


RowKey = tuple[str, uuid.UUID]


def row_keys(conn: Connection, table: Table, tenant_id: str | None = None) -> set[RowKey]:
    """The (tenant, id) of every row of ``table`` (of one tenant, or all)."""
    query = select(table.c.tenant_id, table.c.id)
    if tenant_id is not None:
        query = query.where(table.c.tenant_id == tenant_id)
    return {(tenant, row_id) for tenant, row_id in conn.execute(query)}


#: How many of the orphan rows' ids an error holds (``details.ids``), and names in its message.
SHOWN_ORPHANS = 1000
LISTED_ORPHANS = 20


def orphan_rows_error(entity_def: EntityDef, orphans: Collection[RowKey]) -> ConflictError:
    """The error that stops a rebuild which would drop ``orphans`` (rows without events)."""
    ids = sorted(str(row_id) for _, row_id in orphans)
    listed = ", ".join(ids[:LISTED_ORPHANS])
    if len(ids) > LISTED_ORPHANS:
        listed += f" and {len(ids) - LISTED_ORPHANS} more (details.ids)"
    return ConflictError(
        Reasons.PROJECTION_ORPHAN_ROWS,
        entity=entity_def.key,
        count=len(ids),
        ids=ids[:SHOWN_ORPHANS],
        listed=listed,
    )


#: The event columns a replay reads, in ``StoredEvent`` order (metadata is not needed).
_REPLAY_COLUMNS = tuple(name for name in EVENT_COLUMNS if name != "metadata")


def _replayed_event(row: Any) -> StoredEvent:
    id_, stream_id, stream_type, tenant_id, version, type_, schema_version = row[:7]
    payload, created_at, created_by = row[7:]
    return StoredEvent(
        id_,
        stream_id,
        stream_type,
        tenant_id,
        version,
        type_,
        schema_version,
        payload,
        {},
        created_at,
        created_by,
    )


def _write_merged(conn: Connection, table: Table, changes: list[RowChange]) -> None:
    """Write ``changes`` (in event order) as one change per row, grouped into bulk statements."""
    merged: dict[tuple[str, uuid.UUID], RowChange] = {}
    for change in changes:
        key = (change.tenant_id, change.row_id)
        previous = merged.get(key)
        combined = change if previous is None else _merge(previous, change)
        if combined is None:
            # Not expressible as one change (a row deleted, then created again): write what
            # came before, then continue from this change.
            _write_bulk(conn, table, list(merged.values()))
            merged.clear()
            combined = change
        merged[key] = combined
    _write_bulk(conn, table, list(merged.values()))


def _merge(previous: RowChange, change: RowChange) -> RowChange | None:
    """``previous`` followed by ``change`` on the same row, as one change; ``None`` if none."""
    if change.kind == "update" and previous.kind in ("insert", "update"):
        # Built directly: ``dataclasses.replace`` costs several times more, once per event.
        values = previous.values | change.values
        return RowChange(previous.kind, previous.row_id, previous.tenant_id, values)
    if change.kind == "delete":
        return change
    return None


def _write_bulk(conn: Connection, table: Table, changes: list[RowChange]) -> None:
    """One change per row: deletes first, then inserts, then updates grouped by columns."""
    deletes = [c for c in changes if c.kind == "delete"]
    if deletes:
        removal = delete(table).where(
            table.c.id == bindparam("row_id"), table.c.tenant_id == bindparam("row_tenant")
        )
        conn.execute(removal, [{"row_id": c.row_id, "row_tenant": c.tenant_id} for c in deletes])
    inserts = [c.values for c in changes if c.kind == "insert"]
    if inserts:
        conn.execute(insert(table), inserts)
    updates: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for change in changes:
        if change.kind == "update":
            row = {"row_id": change.row_id, "row_tenant": change.tenant_id}
            row.update({f"set_{k}": v for k, v in change.values.items()})
            updates.setdefault(tuple(sorted(change.values)), []).append(row)
    for names, params in updates.items():
        statement = (
            update(table)
            .where(table.c.id == bindparam("row_id"), table.c.tenant_id == bindparam("row_tenant"))
            .values({name: bindparam(f"set_{name}") for name in names})
        )
        conn.execute(statement, params)
