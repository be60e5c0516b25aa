"""A list's ``search=``: its words matched against the entity's ``searchable=True`` fields.

Postgres: full-text search over one document per row (the searchable fields joined, the
``simple`` configuration: lower-cased words, no stemming, any language), each word matched
as a prefix (``star`` finds "stars"); a GIN index on that document is part of the entity
table's declared metadata, so ``create_all`` and the application's migrations
(``asanoha migrate revision``) make it. SQLite: each word must occur in one of the fields
(``LIKE``, case-insensitive for ASCII), with no index.

Either way every word must match (AND), in any searchable field.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import ColumnElement, Index, Table, and_, func, or_, text, true

from asanoha.platform.model.entity import Entity

#: The text search configuration of the document and of the query.
SEARCH_CONFIG = "simple"
#: Marks an index that only Postgres has (read by the migrations' include_object).
POSTGRES_ONLY = "asanoha_postgres_only"

MAX_SEARCH_WORDS = 16

_WORD = re.compile(r"[^\W_]+")


def searchable_fields(entity: Entity) -> list[str]:
    """The names of the entity's ``searchable=True`` fields, in declaration order."""
    return [name for name, declared in entity.fields.items() if declared.searchable]


def search_words(search: str) -> list[str]:
    """The words of a search text (runs of letters and digits; at most 16)."""
    return _WORD.findall(search)[:MAX_SEARCH_WORDS]


def search_document(table: Table, names: Sequence[str]) -> ColumnElement[Any]:
    """The row's searchable text as a ``tsvector`` (Postgres). The GIN index is on exactly
    this expression, which the query repeats: constants are SQL text, not parameters, so
    the planner can match the two."""
    empty = text("''")
    joined: ColumnElement[Any] = func.coalesce(table.c[names[0]], empty)
    for name in names[1:]:
        joined = joined.op("||")(text("' '")).op("||")(func.coalesce(table.c[name], empty))
    return func.to_tsvector(text(f"'{SEARCH_CONFIG}'"), joined)


def search_index(table: Table, entity: Entity) -> Index | None:
    """The GIN index of the entity's search document (created on Postgres only), or
    ``None`` when no field is searchable."""
    names = searchable_fields(entity)
    if not names:
        return None
    index = Index(
        f"ix_{entity.table}_search",
        search_document(table, names),
        postgresql_using="gin",
        info={POSTGRES_ONLY: True},
    )
    index.ddl_if(dialect="postgresql")
    return index


def _full_text(table: Table, names: Sequence[str], words: Sequence[str]) -> ColumnElement[bool]:
    # Words are letters and digits only, so they cannot break the tsquery syntax; each is a prefix.
    query = " & ".join(f"{word}:*" for word in words)
    tsquery = func.to_tsquery(text(f"'{SEARCH_CONFIG}'"), query)
    return search_document(table, names).op("@@")(tsquery)


def _like_words(table: Table, names: Sequence[str], words: Sequence[str]) -> ColumnElement[bool]:
    return and_(
        *(or_(*(table.c[name].contains(word, autoescape=True) for name in names)) for word in words)
    )


_MATCHERS: dict[str, Callable[[Table, Sequence[str], Sequence[str]], ColumnElement[bool]]] = {
    "postgresql": _full_text,
    "sqlite": _like_words,
}


def search_condition(
    backend: str, table: Table, names: Sequence[str], words: Sequence[str]
) -> ColumnElement[bool]:
    """Rows whose searchable fields ``names`` match every word, on the ``backend``
    (``postgresql`` or ``sqlite``); every row when there is no word."""
    if not words:
        return true()
    return _MATCHERS[backend](table, names, words)
