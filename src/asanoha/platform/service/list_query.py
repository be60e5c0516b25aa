"""How an entity's list request becomes its query: filter, search, sort keys, cursor, offset.

Each part is checked before anything is read, and a refusal is a 400 that names the handler
and the part (``filter.<name>.<op>``, ``sort.<name>``, ``search``, ``cursor``, ``offset``).
The rules live here: a field filtered or sorted by is one the caller may read and that is
declared filterable or sortable (the base columns sort too); a personal field filters with
eq, ne or in only, through its blind index; an ordering compares as the backend orders the
column; search takes the ``searchable=True`` fields the caller may read. The entity reader
(``entity_reader``) runs the query; this module only shapes it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pydantic
from sqlalchemy import Select, Table, literal

from asanoha.platform.model import EntityDef, SessionUser
from asanoha.platform.model.crud import MAX_LIST_OFFSET
from asanoha.platform.personal.blind_index import (
    BLIND_OPERATORS,
    blind_column,
    blind_indexed_fields,
)
from asanoha.platform.service import field_access
from asanoha.platform.service.validation import invalid_field
from asanoha.platform.store import keyset
from asanoha.platform.store.backends import Backend
from asanoha.platform.store.search import search_condition, search_words, searchable_fields

SORTABLE_BASE_COLUMNS = frozenset({"created_at", "modified_at", "id", "version"})
FILTER_OPERATORS = frozenset({"eq", "ne", "lt", "lte", "gt", "gte", "in"})

#: The blind index value of a personal field's value: ``(field name, value) -> value``.
BlindValue = Callable[[str, Any], Any]


class ListQuery:
    """Shapes the list queries of one entity for one caller (see the module)."""

    def __init__(
        self,
        entity_def: EntityDef,
        user: SessionUser,
        table: Table,
        backend: Backend,
        handler_qn: str,
        blind_value: BlindValue,
    ) -> None:
        self.entity_def = entity_def
        self._user = user
        self._table = table
        self._backend = backend
        self._handler_qn = handler_qn
        self._blind_value = blind_value

    def check_offset(self, offset: Any) -> int:
        """``offset`` as the number of rows the first page skips."""
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

    def filtered(self, query: Select[Any], filters: Mapping[str, Any]) -> Select[Any]:
        """``query`` keeping the rows that match ``filters`` (field -> value or ``{op: value}``)."""
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

    def searched(self, query: Select[Any], search: str | None) -> Select[Any]:
        """``query`` keeping the rows whose searchable fields hold every word of ``search``."""
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
        backend = self._backend.name
        return query.where(search_condition(backend, self._table, names, search_words(search)))

    def sort_keys(self, sort: Sequence[str]) -> tuple[keyset.SortKey, ...]:
        """The keyset sort keys of ``sort`` (field names, ``-name`` descending)."""
        for key in sort:
            if not isinstance(key, str):
                raise invalid_field(self._handler_qn, "sort", "string_type", "sort keys are names")
            self._check_column(key.lstrip("-"), "sort", sortable=True)
        return tuple(self._sort_key(name, desc) for name, desc in keyset.sort_names(sort))

    def decode_cursor(
        self, cursor: str, digest: str, keys: Sequence[keyset.SortKey]
    ) -> Sequence[Any]:
        """The sort values ``cursor`` carries, for the query of ``digest``."""
        try:
            return keyset.decode_cursor(cursor, digest, keys)
        except keyset.CursorError as error:
            raise invalid_field(self._handler_qn, "cursor", "invalid_cursor", str(error)) from None

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
        return self._backend.comparable(expression, declared.kind)

    def _compare_blind(self, name: str, op: str, value: Any) -> Any:
        """An equality filter on a personal field, through its blind index column."""
        column = self._table.c[blind_column(name)]

        def blind(one: Any) -> Any:
            return self._blind_value(name, one)

        if op == "in":
            return column.in_([blind(one) for one in value])
        return _compare(column, op, None if value is None else blind(value))

    def _compare(self, name: str, column: Any, op: str, value: Any) -> Any:
        if op not in ("lt", "lte", "gt", "gte") or value is None:
            return _compare(column, op, value)
        # Orderings compare as the backend orders the column (decimals on SQLite).
        bound = literal(value, type_=column.type)
        return _compare(self._comparable(name, column), op, self._comparable(name, bound))

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
