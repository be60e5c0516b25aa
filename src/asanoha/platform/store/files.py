"""The rows of uploaded files (``asanoha_files``): one statement per thing done to them.

A row is inserted when an upload has stored its content, attached to the row a write's file
field names it from (in the write's transaction), marked deleted when that row's subject is
forgotten (in the forget's transaction), and marked purged once its content has left the
storage backend (after that commit).
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, insert, or_, select, update

from asanoha.platform.store.tables import Tables


@dataclass(frozen=True)
class StoredFile:
    """One uploaded file as its row holds it."""

    id: uuid.UUID
    tenant_id: str
    name: str
    content_type: str
    size: int
    sha256: str
    storage_key: str
    #: The row that holds it (``entity``, ``row_id``, ``field``), once a write named it.
    entity: str | None = None
    row_id: str | None = None
    field: str | None = None
    deleted: bool = False

    def describe(self) -> dict[str, Any]:
        """What the API answers for it (a read adds its ``url``)."""
        return {
            "id": str(self.id),
            "name": self.name,
            "content_type": self.content_type,
            "size": self.size,
            "sha256": self.sha256,
        }


def _stored(row: Any) -> StoredFile:
    return StoredFile(
        id=row.id,
        tenant_id=row.tenant_id,
        name=row.name,
        content_type=row.content_type,
        size=row.size,
        sha256=row.sha256,
        storage_key=row.storage_key,
        entity=row.entity,
        row_id=row.row_id,
        field=row.field,
        deleted=row.deleted_at is not None,
    )


def insert_file(conn: Connection, tables: Tables, stored: StoredFile, uploaded_by: str) -> None:
    """Record an upload whose content is stored under ``stored.storage_key``."""
    conn.execute(
        insert(tables.files).values(
            id=stored.id,
            tenant_id=stored.tenant_id,
            uploaded_by=uploaded_by,
            name=stored.name,
            content_type=stored.content_type,
            size=stored.size,
            sha256=stored.sha256,
            storage_key=stored.storage_key,
            created_at=dt.datetime.now(dt.UTC),
        )
    )


def find_file(
    conn: Connection, tables: Tables, tenant_id: str, file_id: uuid.UUID, *, for_update: bool
) -> StoredFile | None:
    """The file ``file_id`` of ``tenant_id`` (deleted ones too); ``for_update``: locked until
    the transaction ends, so that a forget and a write naming it do not cross."""
    files = tables.files
    query = select(files).where(files.c.tenant_id == tenant_id, files.c.id == file_id)
    if for_update:
        query = query.with_for_update()
    found = conn.execute(query).first()
    return None if found is None else _stored(found)


def find_files(
    conn: Connection, tables: Tables, tenant_id: str, file_ids: Iterable[uuid.UUID]
) -> dict[uuid.UUID, StoredFile]:
    """The live files of ``file_ids`` in ``tenant_id``, by id: one query."""
    wanted = sorted(set(file_ids))
    if not wanted:
        return {}
    files = tables.files
    query = select(files).where(
        files.c.tenant_id == tenant_id, files.c.id.in_(wanted), files.c.deleted_at.is_(None)
    )
    return {row.id: _stored(row) for row in conn.execute(query)}


def attach_file(
    conn: Connection,
    tables: Tables,
    file_id: uuid.UUID,
    *,
    entity: str,
    row_id: str,
    field: str,
    subject: str,
) -> None:
    """Record that the row ``row_id`` of ``entity``, whose personal data is ``subject``'s,
    holds ``file_id`` in ``field``."""
    files = tables.files
    conn.execute(
        update(files)
        .where(files.c.id == file_id)
        .values(
            entity=entity,
            row_id=row_id,
            field=field,
            subject=subject,
            attached_at=dt.datetime.now(dt.UTC),
        )
    )


#: What a forgotten file's name reads: its name may say whose it was.
FORGOTTEN_NAME = "[forgotten]"


def mark_subject_files_deleted(
    conn: Connection, tables: Tables, tenant_id: str, subject: str
) -> int:
    """Mark the live files of ``subject`` (held by its row, or by a row about it) as
    deleted, their name and digest cleared (a name may say whose the file was, a digest
    tells a known content); how many there were."""
    files = tables.files
    done = conn.execute(
        update(files)
        .where(
            files.c.tenant_id == tenant_id,
            or_(files.c.row_id == subject, files.c.subject == subject),
            files.c.deleted_at.is_(None),
        )
        .values(deleted_at=dt.datetime.now(dt.UTC), name=FORGOTTEN_NAME, sha256="")
    )
    return int(done.rowcount or 0)


def mark_row_files_deleted(
    conn: Connection, tables: Tables, tenant_id: str, entity: str, row_id: str
) -> int:
    """Mark the live files the row ``row_id`` of ``entity`` holds as deleted (the row is
    being deleted for good, in this transaction); how many there were."""
    files = tables.files
    done = conn.execute(
        update(files)
        .where(
            files.c.tenant_id == tenant_id,
            files.c.entity == entity,
            files.c.row_id == row_id,
            files.c.deleted_at.is_(None),
        )
        .values(deleted_at=dt.datetime.now(dt.UTC))
    )
    return int(done.rowcount or 0)


def mark_unattached_deleted(conn: Connection, tables: Tables, before: dt.datetime) -> int:
    """Mark the uploads that no write took and that are older than ``before`` as deleted;
    how many. A write attaching one meanwhile wins (it holds the file's row: the condition
    is checked again once it commits), or finds it deleted (422 ``file_not_found``)."""
    files = tables.files
    done = conn.execute(
        update(files)
        .where(
            files.c.row_id.is_(None),
            files.c.created_at < before,
            files.c.deleted_at.is_(None),
        )
        .values(deleted_at=dt.datetime.now(dt.UTC))
    )
    return int(done.rowcount or 0)


def files_of_subject(
    conn: Connection, tables: Tables, tenant_id: str, subject: str
) -> Sequence[StoredFile]:
    """The live files of ``subject``: held by its row, or by a row about it."""
    files = tables.files
    query = (
        select(files)
        .where(
            files.c.tenant_id == tenant_id,
            or_(files.c.row_id == subject, files.c.subject == subject),
            files.c.deleted_at.is_(None),
        )
        .order_by(files.c.created_at)
    )
    return [_stored(row) for row in conn.execute(query)]


def files_to_purge(conn: Connection, tables: Tables, limit: int = 500) -> Sequence[StoredFile]:
    """Deleted files whose content is still stored (committed deletions only)."""
    files = tables.files
    query = (
        select(files)
        .where(files.c.deleted_at.is_not(None), files.c.purged_at.is_(None))
        .order_by(files.c.deleted_at)
        .limit(limit)
    )
    return [_stored(row) for row in conn.execute(query)]


def mark_purged(conn: Connection, tables: Tables, file_id: uuid.UUID) -> None:
    """Record that the content of the deleted file ``file_id`` has left the storage."""
    files = tables.files
    conn.execute(
        update(files).where(files.c.id == file_id).values(purged_at=dt.datetime.now(dt.UTC))
    )
