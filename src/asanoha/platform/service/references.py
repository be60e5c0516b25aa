"""The rules of reference fields that need the database: a written reference names a live
row of the caller's tenant, and a row that ``on_delete="restrict"`` references cannot be
deleted. The executor runs both as steps of a write, in the write's transaction.

Race: a restricting reference reads its row ``FOR KEY SHARE`` (Postgres), so a concurrent
delete of it, which locks it ``FOR UPDATE`` first, waits for the referencing write to commit
and then sees the new referencing row. Any other reference reads without a lock: its row may
be deleted at any time after the write anyway, so a delete that commits meanwhile leaves no
state the rules forbid, and many writers referring to one row (the orders of one customer)
do not queue on a shared lock of it. SQLite has one writer at a time and needs no lock.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from sqlalchemy import Connection, Select, Table, bindparam, select

from asanoha.platform.errors import ConflictError, Reasons, UnprocessableError
from asanoha.platform.model import EntityDef, Registry
from asanoha.platform.model.entity import SHARED_TENANT
from asanoha.platform.model.registry import Reference
from asanoha.platform.store import Tables
from asanoha.platform.store.inserts import execute_bound


def check_references_exist(
    conn: Connection,
    tables: Tables,
    registry: Registry,
    entity_def: EntityDef,
    tenant_id: str,
    values: Mapping[str, Any],
) -> None:
    """Refuse (422 ``reference_not_found``, naming the field) a written reference to a row
    this tenant does not have, or has deleted; one read per written reference."""
    for reference in registry.references(entity_def.key):
        value = values.get(reference.field)
        if value is None:
            continue
        # A shared row is every tenant's to refer to.
        target_tenant = SHARED_TENANT if reference.target.entity.shared else tenant_id
        if not _is_live(conn, tables, reference, target_tenant, value):
            raise UnprocessableError(
                Reasons.REFERENCE_NOT_FOUND,
                entity=entity_def.key,
                field=reference.field,
                target=reference.target.key,
                id=str(value),
            )


def _is_live(
    conn: Connection, tables: Tables, reference: Reference, tenant_id: str, value: uuid.UUID
) -> bool:
    table = tables.entity(reference.target.key)
    soft_delete = reference.target.entity.soft_delete
    locked = reference.on_delete == "restrict"
    # Compiled once per table and kind (a write pays only the round trip).
    found = execute_bound(
        conn,
        table,
        {"tenant": tenant_id, "row": value},
        kind=("live_row", locked),
        build=lambda: _live_row_statement(table, soft_delete, locked=locked),
    )
    return found is not None


def _live_row_statement(table: Table, soft_delete: bool, *, locked: bool) -> Select[Any]:
    """The read of a live row of ``table``; ``locked``: held ``FOR KEY SHARE`` until the
    write commits."""
    query = select(table.c.id).where(
        table.c.tenant_id == bindparam("tenant"), table.c.id == bindparam("row")
    )
    if soft_delete:
        query = query.where(table.c.is_deleted.is_(False))
    return query.with_for_update(read=True, key_share=True) if locked else query


def restricting(registry: Registry, entity_def: EntityDef) -> tuple[Reference, ...]:
    """The reference fields declared ``on_delete="restrict"`` that refer to ``entity_def``."""
    return tuple(ref for ref in registry.referrers(entity_def.key) if ref.on_delete == "restrict")


def check_delete_allowed(
    conn: Connection,
    tables: Tables,
    registry: Registry,
    entity_def: EntityDef,
    tenant_id: str,
    row_id: uuid.UUID,
) -> None:
    """Refuse (409 ``delete_restricted``, naming the blocking entity and field) deleting a
    row that a live row of a restricting reference field refers to (of any tenant, for a
    shared row)."""
    for reference in restricting(registry, entity_def):
        table = tables.entity(reference.entity.key)
        query = select(table.c.id).where(table.c[reference.field] == row_id)
        if not entity_def.entity.shared:
            query = query.where(table.c.tenant_id == tenant_id)
        if reference.entity.entity.soft_delete:
            query = query.where(table.c.is_deleted.is_(False))
        if conn.execute(query.limit(1)).first() is not None:
            raise ConflictError(
                Reasons.DELETE_RESTRICTED,
                entity=entity_def.key,
                id=str(row_id),
                blocking=reference.entity.key,
                field=reference.field,
            )
