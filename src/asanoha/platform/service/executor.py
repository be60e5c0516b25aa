"""The entity executor: create, update, delete, restore, forget, detail, list of one entity.

Per write verb, in this order: validation, defaults, pre-save hooks, the personal-data gate,
the instruction-field gate, ownership, event append with the expected stream version,
projection row, post-save hooks. Irreversible verbs pass their gate before any read.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pydantic
from sqlalchemy import Connection, Select, exc, func, literal, select

from asanoha.platform.errors import (
    ConflictError,
    InternalError,
    NotFoundError,
    Reasons,
    UnprocessableError,
    ValidationError,
    VersionConflictError,
)
from asanoha.platform.model import EntityDef, Registry, SessionUser
from asanoha.platform.model.crud import MAX_LIST_OFFSET
from asanoha.platform.model.transitions import check_move
from asanoha.platform.personal import entities as personal_entities
from asanoha.platform.personal.blind_index import (
    BLIND_OPERATORS,
    blind_column,
    blind_indexed_fields,
)
from asanoha.platform.personal.vault import PersonalData, Vault
from asanoha.platform.service import erasure, field_access, gates, ownership, provenance
from asanoha.platform.service.event_metadata import event_metadata
from asanoha.platform.service.ownership import OwnerRules
from asanoha.platform.service.request import Request
from asanoha.platform.service.validation import field_errors, invalid_field
from asanoha.platform.store import StoredEvent, Tables, append_event, apply_entity_event, keyset
from asanoha.platform.store.backends import Backend
from asanoha.platform.store.declared_projections import apply_declared_projections
from asanoha.platform.store.events import SubjectKeyExists
from asanoha.platform.store.projections import Row, encode_values
from asanoha.platform.store.search import search_condition, search_words, searchable_fields


@dataclass(frozen=True)
class ExecutorEnv:
    """What the entity executor and reader work with, and nothing more: the registry (hooks,
    handlers), the tables, the personal-data vault, the ownership rules and the database
    backend. The ``Service`` builds one; the executor never sees the ``Service`` itself."""

    registry: Registry
    tables: Tables
    personal: PersonalData
    owner_rules: OwnerRules
    backend: Backend


#: Rows as a list (inside the readers, ``list`` names their method).
Rows = list[Row]
SORTABLE_BASE_COLUMNS = frozenset({"created_at", "modified_at", "id", "version"})
FILTER_OPERATORS = frozenset({"eq", "ne", "lt", "lte", "gt", "gte", "in"})


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
        query = self._apply_filter(query, filter or {})
        query = self._apply_search(query, search)
        keys = self._sort_keys(sort or [])
        shape = {"sort": sort or [], "filter": filter or {}, "search": search or ""}
        digest = keyset.query_digest(self.entity_def.key, shape | {"deleted": include_deleted})
        page_query = query.order_by(*keyset.order_by(keys))
        if cursor:
            page_query = page_query.where(
                keyset.after(keys, self._decode_cursor(cursor, digest, keys))
            )
            if offset:
                raise invalid_field(
                    self._handler_qn,
                    "offset",
                    "offset_with_cursor",
                    "send offset or cursor, not both",
                )
        else:
            page_query = page_query.offset(self._check_offset(offset))
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
        """``rows`` as the caller may see them (see ``field_access``), noted as read."""
        shown = [field_access.without_hidden(row, self._hidden) for row in rows]
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
        query = query.where(self._table.c.tenant_id == self._user.tenant_id)
        rule = self._owner_rule(reach)
        if rule is None:
            return query
        return ownership.owned_rows(query, self._table, self.entity_def, rule, self._user)

    def _load(self, id: uuid.UUID | str, *, include_deleted: bool, for_update: bool = False) -> Row:
        query = self._scoped(select(self._table), "write")
        query = query.where(self._table.c.id == self._parse_id(id))
        if for_update:
            query = query.with_for_update()
        found = self._conn.execute(query).mappings().first()
        row = None if found is None else self._reveal([dict(found)])[0]
        # Another's row answers as a missing one: "not yours" would disclose that it exists.
        if row is None or not self._owns(row, "write"):
            raise NotFoundError(Reasons.ENTITY_NOT_FOUND, entity=self.entity_def.key, id=str(id))
        if not include_deleted and self.entity_def.entity.soft_delete and row["is_deleted"]:
            raise ConflictError(Reasons.ENTITY_DELETED, entity=self.entity_def.key, id=str(id))
        return row

    def _load_live(self, id: uuid.UUID | str, for_update: bool = False) -> Row:
        return self._load(id, include_deleted=False, for_update=for_update)

    def _parse_id(self, value: Any) -> uuid.UUID:
        if isinstance(value, uuid.UUID):
            return value
        try:
            return uuid.UUID(str(value))
        except ValueError:
            raise invalid_field(
                self._handler_qn, "id", "uuid_parsing", "Input should be a valid UUID"
            ) from None

    def _check_offset(self, offset: Any) -> int:
        if isinstance(offset, bool) or not isinstance(offset, int):
            raise invalid_field(self._handler_qn, "offset", "int_type", "offset is a number")
        if not 0 <= offset <= MAX_LIST_OFFSET:
            raise invalid_field(
                self._handler_qn,
                "offset",
                "out_of_range",
                f"offset must be between 0 and {MAX_LIST_OFFSET}",
            )
        return offset

    def _check_column(self, name: str, what: str, *, sortable: bool) -> None:
        field_access.check_readable(self.entity_def, self._user, name, what, self._handler_qn)
        declared = self.entity_def.entity.fields.get(name)
        allowed = (
            (declared.sortable if sortable else declared.filterable)
            if declared
            else (sortable and name in SORTABLE_BASE_COLUMNS)
        )
        if not allowed:
            raise invalid_field(
                self._handler_qn, f"{what}.{name}", f"not_{what}able", f"{name!r} is not {what}able"
            )

    def _comparable(self, name: str, expression: Any) -> Any:
        declared = self.entity_def.entity.fields.get(name)
        if declared is None:
            return expression
        return self._env.backend.comparable(expression, declared.kind)

    def _apply_filter(self, query: Select[Any], filters: Mapping[str, Any]) -> Select[Any]:
        entity = self.entity_def.entity
        for name, condition in filters.items():
            if not isinstance(name, str):
                raise invalid_field(
                    self._handler_qn, "filter", "string_type", "filter keys are field names"
                )
            self._check_column(name, "filter", sortable=False)
            operations = condition if isinstance(condition, dict) else {"eq": condition}
            adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(
                entity.field_python_type(name) | None
            )
            column = self._table.c[name]
            blind = name in blind_indexed_fields(entity)
            for op, raw in operations.items():
                if blind and op in FILTER_OPERATORS and op not in BLIND_OPERATORS:
                    # A personal value is encrypted: its blind index tells only equal values.
                    raise invalid_field(
                        self._handler_qn,
                        f"filter.{name}.{op}",
                        "not_filterable",
                        f"{name!r} is personal data: filter it with eq, ne or in only",
                    )
                if op not in FILTER_OPERATORS:
                    raise invalid_field(
                        self._handler_qn,
                        f"filter.{name}.{op}",
                        "unknown_operator",
                        f"use one of {sorted(FILTER_OPERATORS)}",
                    )
                if op == "in" and not isinstance(raw, list):
                    raise invalid_field(
                        self._handler_qn, f"filter.{name}.in", "list_type", "'in' takes a list"
                    )
                try:
                    value = (
                        [adapter.validate_python(v) for v in raw]
                        if op == "in"
                        else adapter.validate_python(raw)
                    )
                except (pydantic.ValidationError, TypeError) as error:
                    raise invalid_field(
                        self._handler_qn,
                        f"filter.{name}.{op}",
                        "invalid_value",
                        str(error).splitlines()[0],
                    ) from None
                if blind:
                    query = query.where(self._compare_blind(name, op, value))
                else:
                    query = query.where(self._compare(name, column, op, value))
        return query

    def _compare_blind(self, name: str, op: str, value: Any) -> Any:
        """An equality filter on a personal field, through its blind index column."""
        column = self._table.c[blind_column(name)]

        def blind(one: Any) -> Any:
            return personal_entities.blind_value(
                self._vault, self.entity_def, self._user.tenant_id, name, one
            )

        if op == "in":
            return column.in_([blind(one) for one in value])
        return _compare(column, op, None if value is None else blind(value))

    def _compare(self, name: str, column: Any, op: str, value: Any) -> Any:
        if op not in ("lt", "lte", "gt", "gte") or value is None:
            return _compare(column, op, value)
        # Orderings compare as the backend orders the column (decimals on SQLite).
        bound = literal(value, type_=column.type)
        return _compare(self._comparable(name, column), op, self._comparable(name, bound))

    def _sort_keys(self, sort: Sequence[str]) -> tuple[keyset.SortKey, ...]:
        for key in sort:
            if not isinstance(key, str):
                raise invalid_field(self._handler_qn, "sort", "string_type", "sort keys are names")
            self._check_column(key.lstrip("-"), "sort", sortable=True)
        return tuple(self._sort_key(name, desc) for name, desc in keyset.sort_names(sort))

    def _sort_key(self, name: str, descending: bool) -> keyset.SortKey:
        declared = self.entity_def.entity.fields.get(name)
        column = self._table.c[name]
        return keyset.SortKey(
            name=name,
            descending=descending,
            column=self._comparable(name, column),
            kind=declared.kind if declared else keyset.BASE_KINDS[name],
            nullable=declared is not None,
            bind=functools.partial(self._bind, name, column),
        )

    def _bind(self, name: str, column: Any, value: Any) -> Any:
        return self._comparable(name, literal(value, type_=column.type))

    def _decode_cursor(
        self, cursor: str, digest: str, keys: Sequence[keyset.SortKey]
    ) -> Sequence[Any]:
        try:
            return keyset.decode_cursor(cursor, digest, keys)
        except keyset.CursorError as error:
            raise invalid_field(self._handler_qn, "cursor", "invalid_cursor", str(error)) from None

    def _apply_search(self, query: Select[Any], search: str | None) -> Select[Any]:
        if search is None:
            return query
        names = searchable_fields(self.entity_def.entity)
        if not names:
            raise invalid_field(
                self._handler_qn,
                "search",
                "not_searchable",
                f"entity {self.entity_def.key!r} declares no searchable field; declare "
                "fields.text(..., searchable=True) or fields.long_text(..., searchable=True)",
            )
        names = field_access.readable_fields(
            self.entity_def, self._user, names, "search", self._handler_qn
        )
        backend = self._env.backend.name
        return query.where(search_condition(backend, self._table, names, search_words(search)))


class EntityExecutor(EntityReader):
    """Reads and writes one entity for one caller: what a write handler gets."""

    def __init__(
        self,
        env: ExecutorEnv,
        conn: Connection,
        entity_def: EntityDef,
        user: SessionUser,
        request: Request,
        handler_qn: str | None,
    ) -> None:
        super().__init__(env, conn, entity_def, user, request, handler_qn)
        #: The write request every verb runs in (its gates read it).
        self._write_request = request

    # -- writes -----------------------------------------------------------------------------
    #
    # Every verb that changes a row locks it first, then appends its event, then projects it:
    # one lock order for all writers of a stream (domain events on an entity stream too), so
    # concurrent writers queue on the row instead of deadlocking on the event's unique key.
    # The row carries its stream's version, so the version a reader sees is the one to send.

    def create(self, data: Mapping[str, Any]) -> Row:
        """Create a row (a new stream). ``data`` may carry an ``id`` for the new stream."""
        data = dict(data)
        raw_id = data.pop("id", None)
        stream_id = self._parse_id(raw_id) if raw_id is not None else uuid.uuid4()
        entity = self.entity_def.entity
        owner = self._owner_rule("write")
        filled = ownership.owner_default(owner, self.entity_def, data, self._user) if owner else {}
        values = self._validate(entity.create_model(), {**filled, **data})
        given = dict(values)
        for name, declared in entity.fields.items():
            if name not in values and declared.has_default:
                default = declared.default
                values[name] = default() if callable(default) else default
        values = self._run_pre_save(values, None, is_new=True, model=entity.create_model())
        self._run_validate(values, None, is_new=True)
        self._check_write_gates("create", values)
        self._check_transitions(None, values)
        self._check_field_writes("create", given, frozenset(given) - frozenset(filled))
        return self._record(  # type: ignore[return-value]
            str(stream_id),
            0,
            "created",
            self._sealed("data", str(stream_id), values, None),
            may_conflict=bool(entity.unique),
        )

    def update(
        self,
        id: uuid.UUID | str,
        changes: Mapping[str, Any],
        version: int | None = None,
        skip_optimistic_lock: bool = False,
    ) -> Row:
        """Apply ``changes``. ``version`` is the version the caller read (checked unless skipped)."""
        if version is None and not skip_optimistic_lock:
            # A TypeError, as for any call that lacks an argument: the handler's code is
            # wrong, not its caller's payload, so it is no 400 validation error (the caller
            # could not fix it) but a bug, answered 500 and failing a job with this text.
            # The default of None only serves skip_optimistic_lock=True.
            raise TypeError(
                f"update() of {self.entity_def.key} needs version=<the row's current "
                "version>: pass the version of the row the handler read (row['version']), "
                "so a change made since is a version conflict, or skip_optimistic_lock=True "
                "to write over it"
            )
        model = self.entity_def.entity.changes_model()
        values = self._validate(model, dict(changes))
        given = dict(values)
        row = self._load_live(id, for_update=True)
        if not skip_optimistic_lock and version != row["version"]:
            raise VersionConflictError(
                stream_id=str(row["id"]), expected_version=version, current_version=row["version"]
            )
        values = self._run_pre_save(values, row, is_new=False, model=model)
        self._run_validate(values, row, is_new=False)
        self._check_write_gates("update", values)
        self._check_transitions(row, values)
        self._check_field_writes("update", given, frozenset(given))
        return self._record(  # type: ignore[return-value]
            str(row["id"]),
            row["version"],
            "updated",
            self._sealed("changes", str(row["id"]), values, row),
            may_conflict=not self._unique_fields.isdisjoint(values),
        )

    def delete(self, id: uuid.UUID | str) -> Row:
        """Soft-delete the row, or hard-delete it when the entity has no soft delete."""
        hard = not self.entity_def.entity.soft_delete
        if hard:
            gates.check_irreversible(self._request, "delete", entity=self.entity_def.key)
        row = self._load_live(id, for_update=True)
        for hook in self._env.registry.hooks("pre_delete", self.entity_def.key):
            hook(dict(row), self)
        projected = self._record(str(row["id"]), row["version"], "deleted", {"hard": hard})
        for hook in self._env.registry.hooks("post_delete", self.entity_def.key):
            hook(dict(projected or row), self)
        return projected or {"id": row["id"], "version": row["version"] + 1, "deleted": True}

    def restore(self, id: uuid.UUID | str) -> Row:
        """Undo a soft delete."""
        if not self.entity_def.entity.soft_delete:
            raise UnprocessableError(
                error=f"{self.entity_def.key} has no soft delete to restore from"
            )
        row = self._load(id, include_deleted=True, for_update=True)
        if not row["is_deleted"]:
            raise ConflictError(
                Reasons.ENTITY_NOT_DELETED, entity=self.entity_def.key, id=str(row["id"])
            )
        return self._record(str(row["id"]), row["version"], "restored", {})  # type: ignore[return-value]

    def forget(self, id: uuid.UUID | str) -> Row:
        """Delete the row and destroy its data key: every personal value of the row (its
        subject), in its events, job rows and results, reads as ``FORGOTTEN`` from now on.
        Appends a ``forgotten`` event; no stored event changes. Irreversible."""
        # Before the row is read, so a missing id answers 403 too (``erasure`` checks again).
        gates.check_irreversible(self._request, "forget", entity=self.entity_def.key)
        row = self._load(id, include_deleted=True, for_update=True)
        stream_id = str(row["id"])
        erasure.forget_subject(
            self._write_request,
            self._env.personal,
            tenant_id=self._user.tenant_id,
            subject=stream_id,
            by=self._user.id,
            reason=f"{self._handler_qn} forgot {self.entity_def.key} {stream_id}",
            entity=self.entity_def.key,
        )
        self._record(stream_id, row["version"], "forgotten", {})
        return {"id": row["id"], "version": row["version"] + 1, "forgotten": True}

    # -- steps ------------------------------------------------------------------------------

    @functools.cached_property
    def _unique_fields(self) -> frozenset[str]:
        return frozenset(name for index in self.entity_def.entity.unique for name in index)

    def _sealed(
        self, key: str, stream_id: str, values: Mapping[str, Any], current: Row | None
    ) -> dict[str, Any]:
        """The event payload of ``values`` under ``key``, personal values sealed."""
        encoded = encode_values(values)
        if self.entity_def.entity.personal_fields.isdisjoint(encoded):
            return {key: encoded}
        return {
            key: personal_entities.seal_entity_values(
                self._vault, self.entity_def, self._user.tenant_id, stream_id, encoded, current
            )
        }

    def _validate(self, model: type[pydantic.BaseModel], data: dict[str, Any]) -> dict[str, Any]:
        try:
            return model.model_validate(data).model_dump(exclude_unset=True)
        except pydantic.ValidationError as error:
            raise ValidationError(handler=self._handler_qn, fields=field_errors(error)) from None

    def _run_pre_save(
        self,
        values: dict[str, Any],
        previous: Row | None,
        *,
        is_new: bool,
        model: type[pydantic.BaseModel],
    ) -> dict[str, Any]:
        for hook in self._env.registry.pre_save_hooks(self.entity_def.key):
            changed = hook(dict(values), previous, is_new)
            # A hook may add or change fields: its result is checked like caller input, but a
            # value it breaks is the application's fault, not the caller's (500, not 400).
            try:
                values = model.model_validate(changed).model_dump(exclude_unset=True)
            except pydantic.ValidationError as error:
                raise InternalError(
                    Reasons.PRE_SAVE_HOOK_FAILED,
                    entity=self.entity_def.key,
                    hook=_qualified_name(hook),
                    fields=field_errors(error),
                ) from None
        return values

    def _run_validate(self, values: dict[str, Any], previous: Row | None, *, is_new: bool) -> None:
        """The entity's validate hooks; a refusal names the handler that wrote."""
        for hook in self._env.registry.hooks("validate", self.entity_def.key):
            try:
                hook(dict(values), previous, is_new)
            except ValidationError as error:
                error.details.setdefault("handler", self._handler_qn)
                error.details.setdefault("entity", self.entity_def.key)
                raise

    @functools.cached_property
    def _moves_freely(self) -> bool:
        handler = self._env.registry.find_handler(self._handler_qn)
        return handler is not None and handler.skip_transition_guard is not None

    def _check_transitions(self, previous: Row | None, values: Mapping[str, Any]) -> None:
        """The entity's declared transitions, before the event is appended; skipped for a
        handler that declares ``skip_transition_guard``."""
        transitions = self.entity_def.entity.transitions
        if transitions and not self._moves_freely:
            check_move(self.entity_def.key, transitions, previous, values)

    def _check_write_gates(self, verb: str, values: Mapping[str, Any]) -> None:
        gates.check_public_intake(
            self._request,
            self.entity_def.entity.personal_fields,
            values.keys(),
            entity=self.entity_def.key,
        )
        gates.check_instruction_fields(self._request, self.entity_def, verb, values.keys())

    def _check_field_writes(
        self, verb: str, given: Mapping[str, Any], written: frozenset[str]
    ) -> None:
        """The caller's own data (``given``: not defaults or hook values) writes only fields
        it may write (``written``: what it sent), and an owner field only as its own."""
        field_access.check_writable(self.entity_def, self._user, written, verb, self._handler_qn)
        owner = self._owner_rule("write")
        if owner is not None:
            ownership.check_owner_kept(
                owner, self.entity_def, given, self._user, verb, self._handler_qn
            )

    def _record(
        self,
        stream_id: str,
        expected: int,
        verb: str,
        payload: dict[str, Any],
        *,
        may_conflict: bool = False,
    ) -> Row | None:
        """Append the verb's event and project it onto the row: both happen or neither does.

        Only a write that touches a unique index can fail between the two; it runs in a
        savepoint, so the failure leaves the transaction usable (a handler may catch the
        ``ConflictError`` and go on). Other writes pay no savepoint (two round trips).
        """
        if not may_conflict:
            event = self._append(stream_id, expected, verb, payload)
            row = self._project(event)
            apply_declared_projections(self._conn, self._env.registry, event)
        else:
            savepoint = self._conn.begin_nested()
            try:
                event = self._append(stream_id, expected, verb, payload)
                row = self._project(event)
                apply_declared_projections(self._conn, self._env.registry, event)
            except BaseException:
                savepoint.rollback()
                raise
            savepoint.commit()
        if row is not None:
            row = self._reveal([row])[0]
        if self._request is not None:
            self._request.appended.append(event)
        # The one place instruction-field writes are recorded: every row write passes here.
        provenance.record_instruction_write(
            self._conn, self._env.tables, self._request, self._user, self.entity_def, event
        )
        if row is None:
            return None
        for hook in self._env.registry.post_save_hooks(self.entity_def.key):
            hook(row, self)
        return self._shown([row])[0]

    def _append(
        self, stream_id: str, expected: int, verb: str, payload: dict[str, Any]
    ) -> StoredEvent:
        # The key of a row created with personal values goes in with its first event.
        personal = self.entity_def.entity.personal_fields and self._env.personal.encrypts
        try:
            return append_event(
                self._conn,
                self._env.backend,
                self._env.tables,
                tenant_id=self._user.tenant_id,
                stream_id=stream_id,
                stream_type=self.entity_def.key,
                expected_version=expected,
                type=self.entity_def.event_qn(verb),
                payload=payload,
                metadata=event_metadata(self._request, self._user, self._handler_qn),
                created_by=self._user.id,
                schema_version=self.entity_def.entity.version,
                new_keys=self._vault.take_new_keys() if personal else (),
            )
        except SubjectKeyExists as taken:
            raise ConflictError(
                Reasons.SUBJECT_KEY_EXISTS, entity=self.entity_def.key, id=taken.subject
            ) from None

    def _project(self, event: StoredEvent) -> Row | None:
        try:
            return apply_entity_event(
                self._conn,
                self._env.tables,
                self.entity_def,
                event,
                # Blind indexes are computed from the values this vault has just sealed.
                self._vault if blind_indexed_fields(self.entity_def.entity) else None,
            )
        except exc.IntegrityError as error:
            raise ConflictError(
                Reasons.UNIQUE_VIOLATION, entity=self.entity_def.key, index=_constraint_name(error)
            ) from None


def _qualified_name(func: Any) -> str:
    module = getattr(func, "__module__", None) or "?"
    return f"{module}.{getattr(func, '__qualname__', repr(func))}"


def _compare(column: Any, op: str, value: Any) -> Any:
    if op == "eq":
        return column.is_(None) if value is None else column == value
    if op == "ne":
        return column.is_not(None) if value is None else column != value
    if op == "in":
        return column.in_(value)
    return {
        "lt": column < value,
        "lte": column <= value,
        "gt": column > value,
        "gte": column >= value,
    }[op]


def _constraint_name(error: exc.IntegrityError) -> str:
    diag = getattr(error.orig, "diag", None)
    name = getattr(diag, "constraint_name", None)
    return str(name) if name else "unique"
