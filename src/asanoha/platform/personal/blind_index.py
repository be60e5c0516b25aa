"""Blind indexes: an HMAC-SHA256 of a personal value under the tenant's index key, kept in a
column of its own so that equality filters and unique indexes work on encrypted values.

An index lives in its row only: it is computed where the row is written (live or in a
rebuild) from the opened value, never stored in an event, and a forget clears the indexes of
the subject's values (``forget_blind_indexes``). The tenant's index key outlives every
subject, so an index left behind would keep telling whether a guessed value was the
forgotten one.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, select, update

from asanoha.platform.model.entity import Entity
from asanoha.platform.model.kept import kept
from asanoha.platform.personal import cipher

if TYPE_CHECKING:
    from asanoha.platform.store.tables import Tables

#: Where ``Entity.unique`` or a filter on a personal field looks: ``<field>__bidx``.
BLIND_SUFFIX = "__bidx"
#: The operators a blind index answers (it only tells equal values apart).
BLIND_OPERATORS = frozenset({"eq", "ne", "in"})


def blind_column(name: str) -> str:
    """The column holding the blind index of field ``name``."""
    return f"{name}{BLIND_SUFFIX}"


def blind_indexed_fields(entity: Entity) -> frozenset[str]:
    """The personal fields that are filterable or part of a unique index."""
    # Asked on every write and read of the entity.
    return kept(entity, "blind_indexed_fields", lambda: _blind_indexed(entity))


def _blind_indexed(entity: Entity) -> frozenset[str]:
    unique = {name for index in entity.unique for name in index}
    return frozenset(
        name
        for name, declared in entity.fields.items()
        if declared.is_personal and (declared.filterable or name in unique)
    )


def blind_hash(index_key: bytes, scope: str, field: str, value: Any) -> str:
    """The blind index of ``value`` (JSON as stored) of ``scope``'s ``field``."""
    message = json.dumps([scope, field, value], separators=(",", ":"), ensure_ascii=False)
    return hmac.new(index_key, message.encode(), hashlib.sha256).hexdigest()


def forget_blind_indexes(conn: Connection, tables: Tables, tenant_id: str, subject: str) -> int:
    """Clear the blind index of every value sealed for the subject, in every entity table of
    the tenant; return how many were cleared. A value names its subject in its sealed text,
    so the rows are found by it (whatever the field's stance, and after a rename too)."""
    start = cipher.subject_start(tenant_id, subject)
    cleared = 0
    for table in tables.entities.values():
        for index in [column for column in table.c if column.name.endswith(BLIND_SUFFIX)]:
            value = table.c[index.name[: -len(BLIND_SUFFIX)]]
            found = conn.execute(
                select(table.c.id, value).where(
                    table.c.tenant_id == tenant_id,
                    index.is_not(None),
                    value.startswith(start, autoescape=True),
                )
            ).all()
            ids = [row_id for row_id, text in found if _sealed_for(text, tenant_id, subject)]
            if ids:
                conn.execute(
                    update(table)
                    .where(table.c.tenant_id == tenant_id, table.c.id.in_(ids))
                    .values({index.name: None})
                )
                cleared += len(ids)
    return cleared


def _sealed_for(text: str, tenant_id: str, subject: str) -> bool:
    sealed = cipher.parse(text)
    return sealed is not None and sealed.key_ref == (tenant_id, subject)
