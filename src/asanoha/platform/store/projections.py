"""Entity rows as projections of their streams.

``apply_entity_event`` is the only code that writes entity rows: the live write path calls it
with the event it just appended, and ``rebuild_projection`` replays a whole table through it.
"""

from __future__ import annotations

import datetime as dt
import decimal
import uuid
from collections.abc import Mapping
from typing import Any

from sqlalchemy import Connection, Table, delete, insert, select, update

from asanoha.platform.model import EntityDef
from asanoha.platform.model.fields import Field
from asanoha.platform.store.events import StoredEvent
from asanoha.platform.store.tables import Tables

Row = dict[str, Any]


def encode_value(value: Any) -> Any:
    """A field value as JSON for an event payload."""
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal | uuid.UUID):
        return str(value)
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
    if declared.kind == "reference":
        return uuid.UUID(value)
    return value


def encode_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """Every value of ``values`` encoded for an event payload."""
    return {name: encode_value(value) for name, value in values.items()}


def _decode_all(entity_def: EntityDef, values: Mapping[str, Any]) -> dict[str, Any]:
    declared = entity_def.entity.fields
    return {
        name: decode_value(declared[name], value)
        for name, value in values.items()
        if name in declared
    }


def apply_entity_event(
    conn: Connection, tables: Tables, entity_def: EntityDef, event: StoredEvent
) -> Row | None:
    """Write the row change that ``event`` describes; return the row, or ``None`` once gone."""
    table = tables.entity(entity_def.key)
    verb = event.type.rsplit(".", 1)[-1]
    row_id = uuid.UUID(event.stream_id)
    stamp = {
        "version": event.version,
        "modified_at": event.created_at,
        "modified_by": event.created_by,
    }
    if verb == "created":
        row: Row = {
            "id": row_id,
            "tenant_id": event.tenant_id,
            "created_at": event.created_at,
            "created_by": event.created_by,
            **stamp,
            **{name: None for name in entity_def.entity.fields},
            **_decode_all(entity_def, event.payload.get("data", {})),
        }
        if entity_def.entity.soft_delete:
            row |= {"is_deleted": False, "deleted_at": None, "deleted_by": None}
        conn.execute(insert(table), row)
        return row
    if verb == "updated":
        return _update(
            conn, table, event, stamp | _decode_all(entity_def, event.payload.get("changes", {}))
        )
    if verb == "deleted" and entity_def.entity.soft_delete:
        deleted = {
            "is_deleted": True,
            "deleted_at": event.created_at,
            "deleted_by": event.created_by,
        }
        return _update(conn, table, event, stamp | deleted)
    if verb == "restored":
        return _update(
            conn,
            table,
            event,
            stamp | {"is_deleted": False, "deleted_at": None, "deleted_by": None},
        )
    if verb in ("deleted", "forgotten"):
        conn.execute(
            delete(table).where(table.c.id == row_id, table.c.tenant_id == event.tenant_id)
        )
        return None
    raise ValueError(f"{event.type} is not an entity event of {entity_def.key}")


def _update(conn: Connection, table: Table, event: StoredEvent, values: Row) -> Row | None:
    statement = (
        update(table)
        .where(table.c.id == uuid.UUID(event.stream_id), table.c.tenant_id == event.tenant_id)
        .values(values)
        .returning(*table.c)
    )
    found = conn.execute(statement).mappings().first()
    return dict(found) if found is not None else None


def rebuild_projection(
    conn: Connection, tables: Tables, entity_def: EntityDef, batch: int = 1000
) -> int:
    """Empty the entity's table and replay every event of its streams; return the event count."""
    table = tables.entity(entity_def.key)
    events = tables.events
    conn.execute(delete(table))
    position, replayed = 0, 0
    while True:
        query = (
            select(events)
            .where(events.c.stream_type == entity_def.key, events.c.id > position)
            .order_by(events.c.id)
            .limit(batch)
        )
        rows = conn.execute(query).mappings().all()
        if not rows:
            return replayed
        for found in rows:
            stored = StoredEvent(**{k: v for k, v in found.items() if k != "tx_id"})
            apply_entity_event(conn, tables, entity_def, stored)
            position = stored.id
            replayed += 1
