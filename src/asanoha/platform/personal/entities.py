"""Personal fields of entities: sealed before the event is appended, opened on every read.

A field's stance names its subject: ``"self"`` the row (its id), ``"tenant"`` the tenant,
``{"of": field}`` the row or user that other field holds (the row itself while it is empty).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from asanoha.platform.model import EntityDef
from asanoha.platform.model.fields import TEXT_KINDS, Field
from asanoha.platform.personal.blind_index import blind_column, blind_indexed_fields
from asanoha.platform.personal.sentinel import FORGOTTEN
from asanoha.platform.personal.subject_keys import TENANT_SUBJECT
from asanoha.platform.personal.vault import Vault
from asanoha.platform.store.projections import decode_value, encode_value

Row = dict[str, Any]


def subject_of(
    declared: Field,
    tenant_id: str,
    row_id: str,
    values: Mapping[str, Any],
    current: Mapping[str, Any] | None,
) -> str:
    """The subject of a personal field's value in a row."""
    stance = declared.personal
    if stance == "tenant":
        return TENANT_SUBJECT
    if isinstance(stance, Mapping):
        named = stance["of"]
        value = values[named] if named in values else (current or {}).get(named)
        if value is not None and value is not FORGOTTEN:
            return str(value)
    return row_id


def seal_entity_values(
    vault: Vault,
    entity_def: EntityDef,
    tenant_id: str,
    row_id: str,
    encoded: Mapping[str, Any],
    current: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``encoded`` (event payload values) with the personal ones sealed.

    Their blind indexes are not part of the event: the projection computes them from the
    opened values (``Vault.blind_columns``), so that they follow a renamed field and no
    stored event holds an index that would still match a forgotten value."""
    entity = entity_def.entity
    personal = entity.personal_fields
    if personal.isdisjoint(encoded):
        return dict(encoded)
    sealed: dict[str, Any] = {}
    for name, value in encoded.items():
        if name not in personal:
            sealed[name] = value
            continue
        subject = subject_of(entity.fields[name], tenant_id, row_id, encoded, current)
        sealed[name] = vault.seal(
            tenant_id,
            subject,
            entity_def.key,
            name,
            value,
            # A row being created is a new subject: its key is made without a look first.
            new_subject=current is None and subject == row_id,
        )
    return sealed


def reveal_rows(vault: Vault, entity_def: EntityDef, rows: list[Row]) -> list[Row]:
    """``rows`` (as read from the table) with their personal values opened and decoded, and
    without their blind index columns."""
    entity = entity_def.entity
    personal = entity.personal_fields
    if not personal or not rows:
        return rows
    hidden = {blind_column(name) for name in blind_indexed_fields(entity)}
    encrypts = vault.data.encrypts
    if encrypts:
        vault.prepare([row.get(name) for row in rows for name in personal])
    revealed = []
    for row in rows:
        copy = {key: value for key, value in row.items() if key not in hidden}
        for name in personal:
            value = copy.get(name)
            if not isinstance(value, str):
                continue
            opened = vault.open(value) if encrypts else value
            if opened is FORGOTTEN:
                copy[name] = opened
            elif opened is value:
                copy[name] = _plain(entity.fields[name], value)
            else:
                copy[name] = decode_value(entity.fields[name], opened)
        revealed.append(copy)
    return revealed


def _plain(declared: Field, value: str) -> Any:
    """A personal value stored without a master key (its JSON, text as it is)."""
    if declared.kind in TEXT_KINDS:
        return value
    try:
        return decode_value(declared, json.loads(value))
    except ValueError:
        try:
            return decode_value(declared, value)
        except ValueError:
            return value


def blind_value(vault: Vault, entity_def: EntityDef, tenant_id: str, name: str, value: Any) -> Any:
    """What a filter compares the blind index column of ``name`` with, for ``value``."""
    return vault.blind(tenant_id, entity_def.key, name, encode_value(value))
