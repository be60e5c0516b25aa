"""The rows an entity's retention has come due for: created before a cut, in one tenant,
a page at a time in id order (a keyset, so a long table is read in bounded pages and a row
skipped on one page is not read again in the same run)."""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass

from sqlalchemy import Connection, select

from asanoha.platform.model import EntityDef
from asanoha.platform.store.tables import Tables


@dataclass(frozen=True)
class DuePage:
    """One page of due rows: their ids, and the id to read on from (``None``: the last
    page)."""

    ids: tuple[uuid.UUID, ...]
    after: uuid.UUID | None


def due_rows(
    conn: Connection,
    tables: Tables,
    entity_def: EntityDef,
    tenant_id: str,
    *,
    created_before: dt.datetime,
    after: uuid.UUID | None,
    limit: int,
    skip_forgotten: bool,
) -> DuePage:
    """The ids of ``entity_def``'s rows of ``tenant_id`` created before ``created_before``,
    after ``after`` in id order, at most ``limit``. Soft-deleted rows count (they still hold
    their values). ``skip_forgotten``: leave out the rows whose subject (the row) was
    forgotten already, so an anonymized row is not anonymized again every day."""
    table = tables.entity(entity_def.key)
    query = (
        select(table.c.id)
        .where(table.c.tenant_id == tenant_id, table.c.created_at < created_before)
        .order_by(table.c.id)
        .limit(limit)
    )
    if after is not None:
        query = query.where(table.c.id > after)
    ids = [uuid.UUID(str(found)) for found in conn.execute(query).scalars()]
    more = ids[-1] if len(ids) == limit else None
    if skip_forgotten and ids:
        keys = tables.subject_keys
        forgotten = set(
            conn.execute(
                select(keys.c.subject).where(
                    keys.c.tenant_id == tenant_id,
                    keys.c.subject.in_([str(one) for one in ids]),
                    keys.c.forgotten_at.is_not(None),
                )
            ).scalars()
        )
        ids = [one for one in ids if str(one) not in forgotten]
    return DuePage(tuple(ids), more)
