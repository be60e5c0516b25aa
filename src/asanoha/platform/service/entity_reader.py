"""The entity reader: detail, get, list and the ``_refs`` labels of one entity, for one caller.

Every read is confined to the caller's tenant (the ``_shared`` tenant for a shared entity)
and, where an owner rule confines the caller's reach, to the rows it owns: another's row reads
as a missing one. A row is handed over with its personal values opened and only the fields
the caller may read (``field_access``), noted as read for the trust labels of the result. A
list's filter, sort, search and cursor are shaped by ``list_query``. In a query the write verbs
answer 403 ``write_in_query_denied`` before anything is read (``EntityExecutor``, in
``executor``, does them).
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Select, func, select

from asanoha.platform.errors import NotFoundError, Reasons, ValidationError
from asanoha.platform.model import EntityDef, Registry, SessionUser
from asanoha.platform.model.entity import SHARED_TENANT
from asanoha.platform.model.registry import Reference
from asanoha.platform.personal import entities as personal_entities
from asanoha.platform.personal.vault import PersonalData, Vault
from asanoha.platform.service import field_access, gates, ownership
from asanoha.platform.service.files import Files, file_fields
from asanoha.platform.service.list_query import ListQuery
from asanoha.platform.service.ownership import OwnerRules
from asanoha.platform.service.request import Request
from asanoha.platform.service.validation import invalid_field
from asanoha.platform.store import Tables, keyset
from asanoha.platform.store.backends import Backend
from asanoha.platform.store.projections import Row


@dataclass(frozen=True)
class ExecutorEnv:
    """What the entity executor and reader work with, and nothing more: the registry (hooks,
    handlers), the tables, the personal-data vault, the ownership rules, the database
    backend and the files (their download links). The ``Service`` builds one; the executor
    never sees the ``Service`` itself."""

    registry: Registry
    tables: Tables
    personal: PersonalData
    owner_rules: OwnerRules
    backend: Backend
    files: Files


#: Rows as a list (inside the readers, ``list`` names their method).
Rows = list[Row]


class EntityReader:
    """Reads one entity for one caller (tenant-scoped), inside the caller's connection.

    What a query handler gets from ``ctx.entity(name)``: it runs outside a write
    transaction, so its write verbs only answer 403 ``write_in_query_denied``, naming the
    handler, before anything is read or validated (``EntityExecutor`` does them).
    """

    def __init__(
        self,
        env: ExecutorEnv,
        conn: Connection,
        entity_def: EntityDef,
        user: SessionUser,
        request: Request | None,
        handler_qn: str | None,
    ) -> None:
        self._env = env
        self._conn = conn
        self.entity_def = entity_def
        self._user = user
        self._request = request
        self._handler_qn = handler_qn or entity_def.key
        self._table = env.tables.entity(entity_def.key)
        #: The tenant whose rows the caller reads and writes: its own, or ``SHARED_TENANT``
        #: for a shared entity (``Entity(shared=True)``), whose rows every tenant reads.
        self._row_tenant = SHARED_TENANT if entity_def.entity.shared else user.tenant_id
        self._has_files = bool(file_fields(entity_def))

    # -- reads ------------------------------------------------------------------------------

    def detail(self, id: uuid.UUID | str, include_deleted: bool = False) -> Row | None:
        """The row, or ``None`` when this tenant has no such (live) row."""
        try:
            row_id = self._parse_id(id)
        except ValidationError:
            return None
        query = self._scoped(select(self._table)).where(self._table.c.id == row_id)
        if not include_deleted and self.entity_def.entity.soft_delete:
            query = query.where(self._table.c.is_deleted.is_(False))
        found = self._conn.execute(query).mappings().first()
        if found is None:
            return None
        row = self._reveal([dict(found)])[0]
        if not self._owns(row, "read"):
            return None
        return self._shown([row])[0]

    def refs(self, rows: Sequence[Row]) -> dict[str, Any]:
        """``_refs`` of ``rows``: each id their labelled reference fields hold, with its
        row's label, as the caller may read it. One query per referenced entity and label
        field, whatever the number of rows."""
        wanted: dict[tuple[str, str], set[uuid.UUID]] = {}
        for reference in self._labelled_references:
            assert reference.label_field is not None
            ids = wanted.setdefault((reference.target.key, reference.label_field), set())
            ids.update(row[reference.field] for row in rows if row.get(reference.field))
        labels: dict[str, Any] = {}
        for (target_key, label_field), ids in wanted.items():
            if not ids:
                continue
            target = self._env.registry.entity(target_key)
            reader = EntityReader(
                self._env, self._conn, target, self._user, self._request, self._handler_qn
            )
            labels.update(reader._labels(ids, label_field))
        return labels

    def with_refs(self, row: Row) -> Row:
        """``row`` with its ``_refs`` (see ``refs``) when the entity has labelled references."""
        if not self._labelled_references:
            return row
        return {**row, "_refs": self.refs([row])}

    @functools.cached_property
    def _labelled_references(self) -> tuple[Reference, ...]:
        references_ = self._env.registry.references(self.entity_def.key)
        return tuple(reference for reference in references_ if reference.label_field)

    def _labels(self, ids: Iterable[uuid.UUID], label_field: str) -> dict[str, Any]:
        """The ``label_field`` value of each of ``ids`` the caller may read (live rows of its
        tenant that it owns, a label field it may read)."""
        if label_field in self._hidden:
            return {}
        query = self._scoped(select(self._table)).where(self._table.c.id.in_(sorted(ids)))
        if self.entity_def.entity.soft_delete:
            query = query.where(self._table.c.is_deleted.is_(False))
        found = self._reveal([dict(r) for r in self._conn.execute(query).mappings()])
        owned = [row for row in found if self._owns(row, "read")]
        return {str(row["id"]): row[label_field] for row in self._shown(owned)}

    def get(self, id: uuid.UUID | str) -> Row:
        """The row; ``NotFoundError`` when there is none."""
        row = self.detail(id)
        if row is None:
            raise NotFoundError(Reasons.ENTITY_NOT_FOUND, entity=self.entity_def.key, id=str(id))
        return row

    # -- writes: refused in a query ---------------------------------------------------------

    def create(self, data: Mapping[str, Any]) -> Row:
        """Refused in a query: 403 ``write_in_query_denied``."""
        raise gates.write_in_query_denied(self._handler_qn, "create", self.entity_def.key)

    def update(
        self,
        id: uuid.UUID | str,
        changes: Mapping[str, Any],
        version: int | None = None,
        skip_optimistic_lock: bool = False,
    ) -> Row:
        """Refused in a query: 403 ``write_in_query_denied``."""
        raise gates.write_in_query_denied(self._handler_qn, "update", self.entity_def.key)

    def delete(self, id: uuid.UUID | str) -> Row:
        """Refused in a query: 403 ``write_in_query_denied``."""
        raise gates.write_in_query_denied(self._handler_qn, "delete", self.entity_def.key)

    def restore(self, id: uuid.UUID | str) -> Row:
        """Refused in a query: 403 ``write_in_query_denied``."""
        raise gates.write_in_query_denied(self._handler_qn, "restore", self.entity_def.key)

    def forget(self, id: uuid.UUID | str) -> Row:
        """Refused in a query: 403 ``write_in_query_denied``."""
        raise gates.write_in_query_denied(self._handler_qn, "forget", self.entity_def.key)

    def anonymize(self, id: uuid.UUID | str) -> Row:
        """Refused in a query: 403 ``write_in_query_denied``."""
        raise gates.write_in_query_denied(self._handler_qn, "anonymize", self.entity_def.key)

    def list(
        self,
        limit: int = 50,
        offset: int = 0,
        cursor: str | None = None,
        sort: list[str] | None = None,
        filter: Mapping[str, Any] | None = None,
        include_deleted: bool = False,
        with_total: bool = False,
        search: str | None = None,
    ) -> dict[str, Any]:
        """A page of rows: ``{"rows": [...], "next_cursor": str | None}``, and ``"total"``
        (every matching row, counted by a second query) with ``with_total=True``.

        ``sort`` names sortable fields (``-name`` descending); ``filter`` maps filterable fields to
        a value or to ``{op: value}`` with op in eq, ne, lt, lte, gt, gte, in; ``search`` keeps
        the rows whose ``searchable=True`` fields hold every word of it. The cursor is
        opaque (a keyset: the last row's sort values, see ``store.keyset``); pass it back with
        the same sort, filter and search to get the next page. ``offset`` skips rows of the
        first page (kept for compatibility; a cursor pages stably while rows change).
        """
        table = self._table
        query = self._scoped(select(table))
        if not include_deleted and self.entity_def.entity.soft_delete:
            query = query.where(table.c.is_deleted.is_(False))
        query = self._lists.filtered(query, filter or {})
        query = self._lists.searched(query, search)
        keys = self._lists.sort_keys(sort or [])
        shape = {"sort": sort or [], "filter": filter or {}, "search": search or ""}
        digest = keyset.query_digest(self.entity_def.key, shape | {"deleted": include_deleted})
        page_query = query.order_by(*keyset.order_by(keys))
        if cursor:
            page_query = page_query.where(
                keyset.after(keys, self._lists.decode_cursor(cursor, digest, keys))
            )
            if offset:
                raise invalid_field(
                    self._handler_qn,
                    "offset",
                    "offset_with_cursor",
                    "send offset or cursor, not both",
                )
        else:
            page_query = page_query.offset(self._lists.check_offset(offset))
        rows = self._reveal(
            [dict(r) for r in self._conn.execute(page_query.limit(limit + 1)).mappings()]
        )
        page = rows[:limit]
        next_cursor = None
        if len(rows) > limit:
            next_cursor = keyset.encode_cursor([page[-1][key.name] for key in keys], digest)
        rule = self._owner_rule("read")
        if rule is not None and not rule.is_column:
            page, next_cursor = self._owned_page(query, keys, digest, rows, limit, rule)
        result: dict[str, Any] = {"rows": self._shown(page), "next_cursor": next_cursor}
        if self._labelled_references:
            result["_refs"] = self.refs(result["rows"])
        if with_total and rule is not None and not rule.is_column:
            # A function owner is asked of every matching row: its count reads them all.
            matching = self._reveal(
                [dict(r) for r in self._conn.execute(query.order_by(None)).mappings()]
            )
            result["total"] = len(ownership.keep_owned(rule, matching, self._user))
        elif with_total:
            # A second query over the same conditions, without order, cursor or limit.
            counted = select(func.count()).select_from(query.order_by(None).subquery())
            result["total"] = int(self._conn.execute(counted).scalar_one())
        return result

    # -- reading helpers --------------------------------------------------------------------

    def _owner_rule(self, reach: ownership.Reach) -> ownership.OwnerRule | None:
        """The owner rule confining this caller's ``reach`` of the entity, if any."""
        return self._env.owner_rules.rule(self.entity_def, reach, self._user)

    def _owned_page(
        self,
        query: Select[Any],
        keys: Sequence[keyset.SortKey],
        digest: str,
        rows: Rows,
        limit: int,
        rule: ownership.OwnerRule,
    ) -> tuple[Rows, str | None]:
        """A page of the rows a function owner gives the caller, from ``rows`` (the first
        ``limit + 1`` read) on. It reads on past rows the caller does not own until the page
        is full, so that the cursor names an owned row: one after another's row would
        disclose that row's id."""
        kept = ownership.keep_owned(rule, rows, self._user)
        batch = rows
        while len(kept) <= limit and len(batch) > limit:
            last = [batch[-1][key.name] for key in keys]
            more = query.order_by(*keyset.order_by(keys)).where(keyset.after(keys, last))
            batch = self._reveal(
                [dict(r) for r in self._conn.execute(more.limit(limit + 1)).mappings()]
            )
            kept += ownership.keep_owned(rule, batch, self._user)
        page = kept[:limit]
        if len(kept) <= limit:
            return page, None
        return page, keyset.encode_cursor([page[-1][key.name] for key in keys], digest)

    def _owns(self, row: Row, reach: ownership.Reach) -> bool:
        """Whether the caller owns ``row`` (a function owner is asked per row)."""
        rule = self._owner_rule(reach)
        return rule is None or ownership.owned(rule, row, self._user)

    @property
    def _vault(self) -> Vault:
        return self._env.personal.vault(self._conn)

    def _reveal(self, rows: Rows) -> Rows:
        """``rows`` as read, with their personal values opened (see ``personal``)."""
        if not self.entity_def.entity.personal_fields:
            return rows
        return personal_entities.reveal_rows(self._vault, self.entity_def, rows)

    @functools.cached_property
    def _hidden(self) -> frozenset[str]:
        return field_access.hidden_fields(self.entity_def, self._user)

    def _shown(self, rows: Rows) -> Rows:
        """``rows`` as the caller may see them (see ``field_access``), noted as read; the
        file fields it may read carry their file and a signed link (``service.files``)."""
        shown = [field_access.without_hidden(row, self._hidden) for row in rows]
        if self._has_files:
            linked = None if self._request is None else self._request.linked
            shown = self._env.files.shown(
                self._conn, self.entity_def, self._row_tenant, shown, linked=linked
            )
        self._note_read(shown)
        return shown

    def _note_read(self, rows: Iterable[Row]) -> None:
        # The rows handed to the handler are what its result may carry: noted for the trust
        # labels of the result, when the call collects them.
        if self._request is not None and self._request.reads is not None:
            self._request.reads.note(self.entity_def, rows)

    def _scoped(self, query: Select[Any], reach: ownership.Reach = "read") -> Select[Any]:
        """``query`` confined to the caller's tenant, and to its own rows where an owner
        rule confines the caller's ``reach`` (see ``ownership``)."""
        query = query.where(self._table.c.tenant_id == self._row_tenant)
        rule = self._owner_rule(reach)
        if rule is None:
            return query
        return ownership.owned_rows(query, self._table, self.entity_def, rule, self._user)

    def _parse_id(self, value: Any) -> uuid.UUID:
        if isinstance(value, uuid.UUID):
            return value
        try:
            return uuid.UUID(str(value))
        except ValueError:
            raise invalid_field(
                self._handler_qn, "id", "uuid_parsing", "Input should be a valid UUID"
            ) from None

    @functools.cached_property
    def _lists(self) -> ListQuery:
        """What shapes this caller's list queries of the entity (see ``list_query``)."""
        return ListQuery(
            self.entity_def,
            self._user,
            self._table,
            self._env.backend,
            self._handler_qn,
            self._blind_value,
        )

    def _blind_value(self, name: str, value: Any) -> Any:
        """What the blind index column of the personal field ``name`` holds for ``value``."""
        return personal_entities.blind_value(
            self._vault, self.entity_def, self._row_tenant, name, value
        )
