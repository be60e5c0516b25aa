"""Blind indexes: an HMAC-SHA256 of a personal value under the tenant's index key, kept in a
column of its own so that equality filters and unique indexes work on encrypted values."""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

from asanoha.platform.model.entity import Entity

#: Where ``Entity.unique`` or a filter on a personal field looks: ``<field>__bidx``.
BLIND_SUFFIX = "__bidx"
#: The operators a blind index answers (it only tells equal values apart).
BLIND_OPERATORS = frozenset({"eq", "ne", "in"})
_KEPT = "_asanoha_blind_indexed_fields"


def blind_column(name: str) -> str:
    """The column holding the blind index of field ``name``."""
    return f"{name}{BLIND_SUFFIX}"


def blind_indexed_fields(entity: Entity) -> frozenset[str]:
    """The personal fields that are filterable or part of a unique index."""
    # Asked on every write and read of the entity: kept with it (its definition is frozen).
    found: frozenset[str] | None = entity.__dict__.get(_KEPT)
    if found is None:
        unique = {name for index in entity.unique for name in index}
        found = frozenset(
            name
            for name, declared in entity.fields.items()
            if declared.is_personal and (declared.filterable or name in unique)
        )
        entity.__dict__[_KEPT] = found
    return found


def blind_hash(index_key: bytes, scope: str, field: str, value: Any) -> str:
    """The blind index of ``value`` (JSON as stored) of ``scope``'s ``field``."""
    message = json.dumps([scope, field, value], separators=(",", ":"), ensure_ascii=False)
    return hmac.new(index_key, message.encode(), hashlib.sha256).hexdigest()
