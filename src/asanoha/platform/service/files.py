"""Files: uploads, the rule of file fields that needs the database, how a read shows them,
and deleting the content of forgotten subjects' files.

- ``Files.upload`` stores an upload's content (``POST /api/files``) within the rate, size
  and type limits, hashed with SHA-256, and records its row. The rate is counted by the
  application's rate limiter (``rate_limits``, ``ASANOHA_FILE_UPLOAD_RATE``); the route
  counts it (``admit_upload``) before it reads the body.
- ``check_file_fields`` is a step of every entity write, beside the reference check, in the
  write's transaction: a written file id names a live file of the tenant that belongs to no
  other row and fits the field's ``types``/``max_size`` (422 otherwise, naming the field);
  ``attach_files`` then records which row holds it, after the event is appended.
- ``Files.shown`` turns the file ids of rows a caller reads into ``{id, name, content_type,
  size, sha256, url}`` with a signed download link: the reader calls it with the fields the
  caller may read, so a link is minted only for those. ``found`` and ``described`` are its
  two halves (look the files up, mint a link), for the feed, which looks up in its reader's
  thread and mints per message; ``relinked`` mints the links of a kept answer again.
- ``forget_row_files`` marks the files of a forgotten subject's row deleted, in the forget's
  transaction (``erasure`` calls it); ``Files.purge`` deletes their content after the commit
  (and again after any later forget, should a delete fail).

The event holds the file id only: a projection rebuilt from the events holds the same ids.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import mimetypes
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO

from sqlalchemy import Connection

from asanoha.platform.errors import (
    NotFoundError,
    PayloadTooLargeError,
    Reasons,
    UnprocessableError,
    UnsupportedMediaTypeError,
)
from asanoha.platform.files.links import FileLinks
from asanoha.platform.files.storage import CHUNK_BYTES, FileStorage
from asanoha.platform.model import EntityDef, SessionUser
from asanoha.platform.model.fields import FILE_KINDS, Field
from asanoha.platform.model.files import (
    IMAGE_TYPES,
    SNIFFED_BYTES,
    accepts,
    any_matches,
    image_type_of,
)
from asanoha.platform.model.kept import kept
from asanoha.platform.personal.entities import subject_of
from asanoha.platform.service.rate_limits import RateLimiter
from asanoha.platform.service.request import RequestMeta
from asanoha.platform.store import Database, Tables
from asanoha.platform.store import files as file_rows
from asanoha.platform.store.files import StoredFile
from asanoha.platform.store.projections import Row

log = logging.getLogger("asanoha.files")

#: What an upload without a usable content type is taken as.
UNKNOWN_TYPE = "application/octet-stream"
MAX_NAME_LENGTH = 255


@dataclass(frozen=True)
class Attachment:
    """A file a write's field names, to be recorded as held by the written row."""

    file_id: uuid.UUID
    field: str
    #: Whose personal data the row is (see ``row_subject``): forgetting it deletes the file.
    subject: str


@dataclass(frozen=True)
class AdmittedUpload:
    """An upload by ``user`` counted against the rate of uploads (``Files.admit_upload``):
    ``Files.upload`` takes it instead of counting the upload again."""

    user: SessionUser


def row_subject(
    entity_def: EntityDef,
    tenant_id: str,
    row_id: str,
    values: Mapping[str, Any],
    current: Mapping[str, Any] | None,
) -> str:
    """Whose personal data a row is, for its files: the subject its personal fields name
    (the first ``personal={"of": "<field>"}`` stance, as ``personal.entities`` reads it),
    else the row itself."""
    for declared in entity_def.entity.fields.values():
        if isinstance(declared.personal, Mapping):
            return subject_of(declared, tenant_id, row_id, values, current)
    return row_id


def file_fields(entity_def: EntityDef) -> dict[str, Field]:
    """The file and image fields of ``entity_def`` (a mapping not to be changed: it is kept
    with the frozen definition, as every write and read asks)."""
    entity = entity_def.entity
    return kept(
        entity,
        "file_fields",
        lambda: {n: f for n, f in entity.fields.items() if f.kind in FILE_KINDS},
    )


def check_file_fields(
    conn: Connection,
    tables: Tables,
    entity_def: EntityDef,
    tenant_id: str,
    row_id: str,
    values: Mapping[str, Any],
    current: Mapping[str, Any] | None = None,
) -> list[Attachment]:
    """Refuse (422, naming the field) a written file id that names no live file of the
    tenant (``file_not_found``), one another row holds (``file_in_use``; which row is not
    said: the caller may not read it), or a file the field
    does not take (``file_type_not_allowed``, ``file_too_large``); the files to attach to the
    row otherwise. Each file row is locked until the write commits, so that a forget of the
    subject that holds it cannot cross the write."""
    attachments: list[Attachment] = []
    for name, declared in file_fields(entity_def).items():
        value = values.get(name)
        if value is None:
            continue
        file_id = value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))
        where = f"{entity_def.key}.{name}"
        found = file_rows.find_file(conn, tables, tenant_id, file_id, for_update=True)
        if found is None or found.deleted:
            raise UnprocessableError(
                Reasons.FILE_NOT_FOUND, entity=entity_def.key, field=name, id=str(file_id)
            )
        if found.row_id is not None and (found.entity, found.row_id) != (entity_def.key, row_id):
            raise UnprocessableError(
                Reasons.FILE_IN_USE,
                entity=entity_def.key,
                field=name,
                id=str(file_id),
            )
        if not accepts(declared, found.content_type):
            raise UnprocessableError(
                Reasons.FILE_TYPE_NOT_ALLOWED,
                entity=entity_def.key,
                field=name,
                id=str(file_id),
                where=where,
                content_type=found.content_type,
                accepted=", ".join(
                    declared.types or (IMAGE_TYPES if declared.kind == "image" else ("*/*",))
                ),
            )
        if declared.max_size is not None and found.size > declared.max_size:
            raise UnprocessableError(
                Reasons.FILE_TOO_LARGE,
                entity=entity_def.key,
                field=name,
                id=str(file_id),
                where=where,
                size=found.size,
                limit=declared.max_size,
            )
        if found.row_id is None:
            subject = row_subject(entity_def, tenant_id, row_id, values, current)
            attachments.append(Attachment(file_id, name, subject))
    return attachments


def attach_files(
    conn: Connection,
    tables: Tables,
    entity_def: EntityDef,
    row_id: str,
    attachments: Sequence[Attachment],
) -> None:
    """Record that the row ``row_id`` holds the ``attachments`` (after its event is appended,
    in the same transaction)."""
    for attachment in attachments:
        file_rows.attach_file(
            conn,
            tables,
            attachment.file_id,
            entity=entity_def.key,
            row_id=row_id,
            field=attachment.field,
            subject=attachment.subject,
        )


def forget_row_files(conn: Connection, tables: Tables, tenant_id: str, subject: str) -> bool:
    """Mark the files of ``subject`` deleted (held by its row, or by a row about it; the
    subject is being forgotten, in this transaction); whether there were any (their content
    is purged after the commit)."""
    return file_rows.mark_subject_files_deleted(conn, tables, tenant_id, subject) > 0


def delete_row_files(
    conn: Connection, tables: Tables, tenant_id: str, entity_def: EntityDef, row_id: str
) -> bool:
    """Mark the files of a row that is deleted for good as deleted, in the delete's
    transaction; whether there were any (their content is purged after the commit)."""
    return file_rows.mark_row_files_deleted(conn, tables, tenant_id, entity_def.key, row_id) > 0


class Files:
    """The files of one application: its storage, its download links, its upload limits."""

    def __init__(
        self,
        database: Database,
        tables: Tables,
        storage: FileStorage,
        links: FileLinks,
        *,
        max_bytes: int,
        upload_types: Sequence[str] = ("*/*",),
        rate_limiter: RateLimiter | None = None,
    ) -> None:
        self._database = database
        self._tables = tables
        self.storage = storage
        self.links = links
        self.max_bytes = max_bytes
        self.upload_types = tuple(upload_types)
        #: Counts uploads per user (``None``: no rate limits in this application).
        self._rate_limiter = rate_limiter

    # -- uploads ----------------------------------------------------------------------------

    def admit_upload(self, user: SessionUser, meta: RequestMeta | None = None) -> AdmittedUpload:
        """Count an upload by ``user`` against the rate of uploads: 429 ``rate_limited``
        when it is one too many (503 ``rate_limit_unavailable`` when Redis does not answer),
        before anything of it is read or stored."""
        if self._rate_limiter is not None:
            self._rate_limiter.check_upload(user, meta)
        return AdmittedUpload(user)

    def upload(
        self,
        user: SessionUser,
        name: str,
        content_type: str | None,
        content: BinaryIO,
        *,
        meta: RequestMeta | None = None,
        admitted: AdmittedUpload | None = None,
    ) -> dict[str, Any]:
        """Store ``content`` (a readable, seekable file) as an upload of ``user``'s tenant:
        429 ``rate_limited`` past the rate of uploads (counted here unless ``admitted`` says
        it was, for this user), 413 ``file_too_large`` past ``max_bytes``, 415
        ``file_type_not_allowed`` for a type the settings do not take or an image type whose
        bytes are no such image. Answers ``{id, name, content_type, size, sha256}``."""
        if admitted is None or admitted.user != user:
            self.admit_upload(user, meta)
        content.seek(0)
        head = content.read(SNIFFED_BYTES)
        kind = _content_type(content_type, name, head)
        if not any_matches(self.upload_types, kind):
            raise UnsupportedMediaTypeError(
                Reasons.FILE_TYPE_NOT_ALLOWED,
                content_type=kind,
                where="POST /api/files",
                accepted=", ".join(self.upload_types),
            )
        if kind in IMAGE_TYPES and image_type_of(head) != kind:
            raise UnsupportedMediaTypeError(
                Reasons.FILE_TYPE_NOT_ALLOWED,
                content_type=kind,
                where="POST /api/files",
                accepted=f"{kind} content (its leading bytes are no {kind} image)",
            )
        content.seek(0)
        digest = hashlib.sha256()
        size = 0
        while chunk := content.read(CHUNK_BYTES):
            size += len(chunk)
            if size > self.max_bytes:
                raise PayloadTooLargeError(
                    Reasons.FILE_TOO_LARGE, limit=self.max_bytes, where="POST /api/files"
                )
            digest.update(chunk)
        file_id = uuid.uuid4()
        stored = StoredFile(
            id=file_id,
            tenant_id=user.tenant_id,
            name=_clean_name(name),
            content_type=kind,
            size=size,
            sha256=digest.hexdigest(),
            storage_key=f"{user.tenant_id}/{file_id}",
        )
        self.storage.put(stored.storage_key, content, size=size, content_type=kind)
        try:
            with self._database.begin() as conn:
                file_rows.insert_file(conn, self._tables, stored, uploaded_by=user.id)
        except BaseException:
            # No row names the content: it goes again.
            self.storage.delete(stored.storage_key)
            raise
        return stored.describe()

    # -- downloads --------------------------------------------------------------------------

    def download(
        self, tenant_id: str, file_id: uuid.UUID, expires: int, signature: str
    ) -> tuple[StoredFile, Any]:
        """The file a signed link names, with its content in chunks: 403 ``file_url_invalid``
        for a link expired or not minted here, 404 ``file_not_found`` for a file deleted
        since."""
        self.links.check(tenant_id, file_id, expires, signature)
        with self._database.connect() as conn:
            found = file_rows.find_file(conn, self._tables, tenant_id, file_id, for_update=False)
        if found is None or found.deleted:
            raise NotFoundError(Reasons.FILE_NOT_FOUND, id=str(file_id))
        try:
            chunks = self.storage.read(found.storage_key)
        except FileNotFoundError:
            raise NotFoundError(Reasons.FILE_NOT_FOUND, id=str(file_id)) from None
        return found, chunks

    # -- reads ------------------------------------------------------------------------------

    def shown(
        self,
        conn: Connection,
        entity_def: EntityDef,
        tenant_id: str,
        rows: list[Row],
        *,
        linked: list[tuple[str, str]] | None = None,
    ) -> list[Row]:
        """``rows`` (already without the fields the caller may not read) with each file id
        replaced by the file and a signed link to it; one query for the whole page. A file
        deleted since (its subject forgotten) reads as ``None``. ``linked`` (a keyed write's
        request) gets each file given a link, as ``(tenant, id)``."""
        names = [name for name in file_fields(entity_def) if any(name in row for row in rows)]
        ids = {row[name] for row in rows for name in names if row.get(name) is not None}
        if not ids:
            return rows
        found = file_rows.find_files(conn, self._tables, tenant_id, ids)
        shown: list[Row] = []
        for row in rows:
            row = dict(row)
            for name in names:
                value = row.get(name)
                if value is None:
                    continue
                stored = found.get(value)
                row[name] = None if stored is None else self.described(stored)
                if stored is not None and linked is not None:
                    linked.append((stored.tenant_id, str(stored.id)))
            shown.append(row)
        return shown

    def found(
        self, conn: Connection, wanted: Iterable[tuple[str, uuid.UUID]]
    ) -> dict[tuple[str, uuid.UUID], StoredFile]:
        """The live files of the ``(tenant, id)`` pairs ``wanted``: one query per tenant."""
        by_tenant: dict[str, set[uuid.UUID]] = {}
        for tenant_id, file_id in wanted:
            by_tenant.setdefault(tenant_id, set()).add(file_id)
        return {
            (tenant_id, file_id): stored
            for tenant_id, ids in by_tenant.items()
            for file_id, stored in file_rows.find_files(conn, self._tables, tenant_id, ids).items()
        }

    def described(self, stored: StoredFile) -> dict[str, Any]:
        """``stored`` as a read shows it: ``{id, name, content_type, size, sha256, url}``
        with a link minted now (give it only to a caller who may read the field)."""
        return {**stored.describe(), "url": self.links.url(stored.tenant_id, stored.id)}

    def relinked(self, conn: Connection, data: Any, linked: Iterable[Sequence[str]]) -> Any:
        """``data``, a kept answer (plain JSON), with the files its call showed with a link
        (``linked``: ``(tenant, id)`` pairs the call noted, never what the answer's values
        claim) shown as a read shows them now: a link minted now, or ``None`` for a file
        deleted since. A repeat of a write comes after its links may have expired; one
        query per tenant."""
        tenants = {str(file_id): str(tenant_id) for tenant_id, file_id in linked}
        if not tenants:
            return data
        found = self.found(conn, [(tenant, uuid.UUID(i)) for i, tenant in tenants.items()])

        def again(value: Any) -> Any:
            if isinstance(value, list):
                return [again(item) for item in value]
            if not isinstance(value, dict):
                return value
            file_id = value.get("id")
            if "url" in value and isinstance(file_id, str) and file_id in tenants:
                stored = found.get((tenants[file_id], uuid.UUID(file_id)))
                return None if stored is None else {**value, **self.described(stored)}
            return {key: again(item) for key, item in value.items()}

        return again(data)

    # -- forgetting -------------------------------------------------------------------------

    def prune_unattached(self, before: dt.datetime) -> int:
        """Delete the uploads no write took before ``before`` (marked, then their content);
        how many were marked."""
        with self._database.begin() as conn:
            marked = file_rows.mark_unattached_deleted(conn, self._tables, before)
        if marked:
            self.purge()
        return marked

    def purge(self) -> int:
        """Delete the content of the files marked deleted by committed forgets; how many
        went. A delete that fails is logged and tried again by the next purge."""
        with self._database.connect() as conn:
            pending = file_rows.files_to_purge(conn, self._tables)
        purged = 0
        for stored in pending:
            try:
                self.storage.delete(stored.storage_key)
            except Exception:
                log.warning("deleting the content of file %s failed", stored.id, exc_info=True)
                continue
            with self._database.begin() as conn:
                file_rows.mark_purged(conn, self._tables, stored.id)
            purged += 1
        return purged


def _content_type(declared: str | None, name: str, head: bytes) -> str:
    """The upload's content type: the one its part declares, else the one its name implies,
    else the image format its leading bytes show, else ``application/octet-stream``."""
    kind = (declared or "").split(";", 1)[0].strip().lower()
    if not kind or kind == UNKNOWN_TYPE:
        kind = (mimetypes.guess_type(name)[0] or "").lower()
    if not kind or kind == UNKNOWN_TYPE:
        kind = image_type_of(head) or UNKNOWN_TYPE
    return kind[:MAX_NAME_LENGTH]


def _clean_name(name: str) -> str:
    """The file's name without a path or control characters, at most 255 characters."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    cleaned = "".join(ch for ch in base if ch.isprintable() and ch != "\x00").strip()
    return (cleaned or "file")[:MAX_NAME_LENGTH]
