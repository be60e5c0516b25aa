"""Keyset paging of entity lists: the order of a list, and the cursor that continues it.

A page ends at a row; the cursor holds that row's sort values (the sort keys, then
``created_at`` and ``id``, which make the order total within a tenant) and the next page
starts strictly after them. Unlike an offset, rows inserted or deleted between two pages
move no row across the boundary: every row that exists throughout is read exactly once.

A cursor is base64url JSON with a digest over its content and the query it belongs to
(entity, sort, filter, search, deleted rows), so a cursor that was edited, cut, or made for
another query is refused rather than silently reading some other page. It is no secret and
no capability: a forged one only reaches rows the caller's own filter would list.

A null sorts as the largest value, on Postgres and on SQLite alike: last ascending, first
descending. That is the order of a Postgres btree index read forwards and backwards, so the
index of a sortable field serves its sort in both directions (a list filtered on one field
and sorted on another reads the sort's index in order and stops after a page, where "nulls
last" descending would sort every matching row first).
"""

from __future__ import annotations

import binascii
import datetime as dt
import decimal
import hashlib
import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, and_, false, or_, tuple_

from asanoha.platform import base64url

#: Version of the cursor's content; a cursor of another version is refused (2: nulls sort
#: as the largest value; before, last in both directions).
CURSOR_VERSION = 2
#: The columns that end every order: unique together within a tenant.
TIEBREAK_KEYS = ("created_at", "id")

#: Kinds a cursor value is read back as (the declared field's kind, or a base column's).
BASE_KINDS: Mapping[str, str] = {
    "created_at": "timestamp",
    "modified_at": "timestamp",
    "id": "reference",
    "version": "integer",
}


class CursorError(ValueError):
    """The cursor is not one this list returned for this query; the message says why."""


@dataclass(frozen=True)
class SortKey:
    """One column of a list's order."""

    name: str
    descending: bool
    #: The column as the backend compares it (decimals cast on SQLite).
    column: ColumnElement[Any]
    #: How the cursor's value is read back: a field kind (``timestamp``, ``decimal``, ...).
    kind: str
    #: Whether the column may hold NULL (declared fields; base columns never do).
    nullable: bool
    #: A value as a literal comparable with ``column`` (typed as the column, cast alike).
    bind: Callable[[Any], ColumnElement[Any]]


def sort_names(sort: Sequence[str]) -> list[tuple[str, bool]]:
    """``(name, descending)`` per key of ``sort`` (``-name`` descending), then the tie-break
    keys; a name keeps its first position."""
    seen: set[str] = set()
    keys: list[tuple[str, bool]] = []
    for key in [*sort, *TIEBREAK_KEYS]:
        name = key.lstrip("-")
        if name not in seen:
            seen.add(name)
            keys.append((name, key.startswith("-")))
    return keys


def order_by(keys: Sequence[SortKey]) -> list[ColumnElement[Any]]:
    """The ``ORDER BY`` of ``keys``."""
    clauses: list[ColumnElement[Any]] = []
    for key in keys:
        if not key.nullable:
            clauses.append(key.column.desc() if key.descending else key.column.asc())
        else:
            # Stated for SQLite, whose default puts nulls first ascending.
            clauses.append(
                key.column.desc().nulls_first() if key.descending else key.column.asc().nulls_last()
            )
    return clauses


def after(keys: Sequence[SortKey], values: Sequence[Any]) -> ColumnElement[bool]:
    """Rows strictly after ``values`` (a row's sort values) in the order of ``keys``."""
    if all(not key.nullable for key in keys) and len({k.descending for k in keys}) == 1:
        # One direction, no nulls: a row-value comparison, which an index can serve.
        left = tuple_(*(key.column for key in keys))
        right = tuple_(*(key.bind(value) for key, value in zip(keys, values, strict=True)))
        return left < right if keys[0].descending else left > right
    # Mixed directions or nullable columns: (k1 > v1) or (k1 = v1 and k2 > v2) or ...
    branches = []
    equal: list[ColumnElement[bool]] = []
    for key, value in zip(keys, values, strict=True):
        branches.append(and_(*equal, _beyond(key, value)))
        equal.append(key.column.is_(None) if value is None else key.column == key.bind(value))
    return or_(*branches)


def _beyond(key: SortKey, value: Any) -> ColumnElement[bool]:
    # A null is the largest value: after it come the other values descending, none ascending.
    if value is None:
        return key.column.is_not(None) if key.descending else false()
    bound = key.bind(value)
    if key.descending:
        return key.column < bound
    return or_(key.column > bound, key.column.is_(None)) if key.nullable else key.column > bound


def query_digest(entity_key: str, shape: Mapping[str, Any]) -> str:
    """A digest of what a list query asks (not its limit): a cursor belongs to one."""
    text = json.dumps([entity_key, shape], sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def encode_cursor(values: Sequence[Any], query: str) -> str:
    """The cursor after a row whose sort values are ``values``, for the query ``query``."""
    body = json.dumps(
        {"v": CURSOR_VERSION, "q": query, "k": [_plain(value) for value in values]},
        separators=(",", ":"),
    ).encode()
    return f"{base64url.encode(body)}.{base64url.encode(_seal(body))}"


def decode_cursor(cursor: str, query: str, keys: Sequence[SortKey]) -> list[Any]:
    """The sort values ``cursor`` holds, typed for ``keys``; ``CursorError`` when it is not a
    cursor of this query."""
    body_text, dot, seal_text = cursor.partition(".")
    try:
        body = base64url.decode(body_text)
        seal = base64url.decode(seal_text)
    except (ValueError, binascii.Error, UnicodeError):
        raise CursorError("not a cursor this list returned") from None
    if not dot or seal != _seal(body):
        raise CursorError("not a cursor this list returned (it was changed or cut)")
    try:
        content = json.loads(body)
    except ValueError:
        raise CursorError("not a cursor this list returned") from None
    if not isinstance(content, dict) or content.get("v") != CURSOR_VERSION:
        raise CursorError("a cursor of another version; start again from the first page")
    if content.get("q") != query:
        raise CursorError(
            "a cursor of another query; send the sort, filter, search and include_deleted "
            "of the page that returned it"
        )
    values = content.get("k")
    if not isinstance(values, list) or len(values) != len(keys):
        raise CursorError("not a cursor this list returned")
    try:
        return [_typed(key, value) for key, value in zip(keys, values, strict=True)]
    except (ValueError, TypeError, ArithmeticError):
        raise CursorError("not a cursor this list returned") from None


def _seal(body: bytes) -> bytes:
    return hashlib.blake2b(body, digest_size=12, person=b"asanoha-cursor").digest()


def _plain(value: Any) -> Any:
    """A sort value as JSON."""
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal | uuid.UUID):
        return str(value)
    return value


def _typed(key: SortKey, value: Any) -> Any:
    """A JSON sort value as the column holds it; raises on a value of the wrong shape."""
    if value is None:
        if not key.nullable:
            raise ValueError(f"{key.name} is never null")
        return None
    kind = key.kind
    if kind == "timestamp":
        parsed = dt.datetime.fromisoformat(_text(value))
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)
    if kind == "date":
        return dt.date.fromisoformat(_text(value))
    if kind == "decimal":
        return decimal.Decimal(_text(value))
    if kind == "reference":
        return uuid.UUID(_text(value))
    if kind == "integer":
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError("an integer")
        return value
    if kind == "number":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TypeError("a number")
        return value
    if kind == "boolean":
        if not isinstance(value, bool):
            raise TypeError("a boolean")
        return value
    return _text(value)


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError("text")
    return value
