"""The rows of ``asanoha_subject_keys``: one wrapped data key per (tenant, subject).

A forgotten subject keeps its row without the key (who forgot it, when, and why): its values
can never be opened again, and no new key is made for it. Every statement that writes a row
is guarded on its own (an insert never replaces a row, a rotation writes only over the live
key it read, a forget is one insert-or-update), so that no writer racing a forget brings the
key back.
"""

from __future__ import annotations

import base64
import datetime as dt
import os
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, Connection, Table, and_, select, tuple_, update

from asanoha.platform.personal.master_keys import KEY_BYTES, KeyWrapper
from asanoha.platform.store.backends import Backend
from asanoha.platform.store.tables import Tables

#: The subject of a tenant's blind index key (never forgotten).
INDEX_SUBJECT = "$index"
#: The subject of values with ``personal="tenant"``.
TENANT_SUBJECT = "$tenant"


@dataclass(frozen=True)
class KeyRow:
    """A subject's key row: its data key, or ``None`` once forgotten."""

    tenant_id: str
    subject: str
    data_key: bytes | None


def is_alive(keys: Table) -> ColumnElement[bool]:
    """The condition of a key row that holds a key: every statement that writes a key into
    a row carries it, so that a destroyed key stays destroyed (a forgotten row is never
    written again, whatever a writer read before)."""
    return and_(keys.c.forgotten_at.is_(None), keys.c.wrapped_key.is_not(None))


def _context(tenant_id: str, subject: str) -> bytes:
    return f"{tenant_id}\x1f{subject}".encode()


def load(
    conn: Connection,
    tables: Tables,
    wrapper: KeyWrapper,
    refs: Collection[tuple[str, str]],
) -> dict[tuple[str, str], bytes | None]:
    """The data keys of ``refs`` that have a row (``None``: forgotten), in one query."""
    if not refs:
        return {}
    keys = tables.subject_keys
    query = select(keys.c.tenant_id, keys.c.subject, keys.c.wrapped_key, keys.c.master_key_id)
    if len(refs) == 1:
        ((tenant_id, subject),) = refs
        query = query.where(keys.c.tenant_id == tenant_id, keys.c.subject == subject)
    else:
        query = query.where(tuple_(keys.c.tenant_id, keys.c.subject).in_(list(refs)))
    found: dict[tuple[str, str], bytes | None] = {}
    for tenant_id, subject, wrapped, key_id in conn.execute(query).all():
        found[(tenant_id, subject)] = (
            None
            if wrapped is None
            else wrapper.unwrap(key_id, base64.b64decode(wrapped), _context(tenant_id, subject))
        )
    return found


def new_key(wrapper: KeyWrapper, tenant_id: str, subject: str) -> tuple[bytes, dict[str, Any]]:
    """A new data key for the subject, and its row (to insert) with the key wrapped."""
    data_key = os.urandom(KEY_BYTES)
    key_id, wrapped = wrapper.wrap(data_key, _context(tenant_id, subject))
    row = {
        "tenant_id": tenant_id,
        "subject": subject,
        "wrapped_key": base64.b64encode(wrapped).decode(),
        "master_key_id": key_id,
        "created_at": dt.datetime.now(dt.UTC),
    }
    return data_key, row


def create(
    conn: Connection,
    backend: Backend,
    tables: Tables,
    wrapper: KeyWrapper,
    tenant_id: str,
    subject: str,
) -> bytes | None:
    """A new data key for the subject; if another writer made one first (or the subject is
    forgotten), that one (or ``None``)."""
    data_key, row = new_key(wrapper, tenant_id, subject)
    if backend.insert_unless_exists(conn, tables.subject_keys, row) is not None:
        return data_key
    return load(conn, tables, wrapper, [(tenant_id, subject)]).get((tenant_id, subject))


def destroy(
    conn: Connection,
    backend: Backend,
    tables: Tables,
    tenant_id: str,
    subject: str,
    *,
    by: str,
    reason: str,
) -> None:
    """Erase the subject's data key, keeping who, when and why (a subject without a key yet
    gets the tombstone, so that none is made for it later)."""
    keys = tables.subject_keys
    now = dt.datetime.now(dt.UTC)
    tombstone: dict[str, Any] = {
        "wrapped_key": None,
        "master_key_id": None,
        "forgotten_at": now,
        "forgotten_by": by,
        "forgotten_reason": reason,
    }
    # One statement: an update of the row and an insert when there is none, as two, would
    # let a key made in between (a row being created) survive the forget. The first
    # forget's who, when and why are kept.
    backend.insert_or_update(
        conn,
        keys,
        {"tenant_id": tenant_id, "subject": subject, "created_at": now} | tombstone,
        tombstone,
        keys.c.forgotten_at.is_(None),
    )


def rotate(conn: Connection, tables: Tables, wrapper: KeyWrapper) -> int:
    """Re-wrap every data key not wrapped by the current master key; return how many."""
    keys = tables.subject_keys
    query = select(
        keys.c.tenant_id, keys.c.subject, keys.c.wrapped_key, keys.c.master_key_id
    ).where(is_alive(keys), keys.c.master_key_id != wrapper.current_key_id)
    count = 0
    for tenant_id, subject, wrapped, key_id in conn.execute(query).all():
        context = _context(tenant_id, subject)
        data_key = wrapper.unwrap(key_id, base64.b64decode(wrapped), context)
        new_id, rewrapped = wrapper.wrap(data_key, context)
        # The key is read without a lock: written back only while it is the one read. A
        # forget (or another rotation) that committed in between wins; on Postgres the
        # statement waits for one still running and checks its condition again after it.
        count += conn.execute(
            update(keys)
            .where(
                keys.c.tenant_id == tenant_id,
                keys.c.subject == subject,
                is_alive(keys),
                keys.c.wrapped_key == wrapped,
            )
            .values(wrapped_key=base64.b64encode(rewrapped).decode(), master_key_id=new_id)
        ).rowcount
    return count
