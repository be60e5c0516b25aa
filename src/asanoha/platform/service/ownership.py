"""Row ownership: which rows of an entity a caller reaches.

An entity's standard handlers may declare ``Access(..., owner=...)``: its ``read=`` rule
confines every read of the entity (list, detail, ``ctx.entity(...).get``) to the caller's own
rows, its ``write=`` rule every change of an existing row (update, delete, restore, forget).
The rule belongs to the entity, not to the handler that happens to call the executor, so a
custom handler's ``ctx.entity(...)``, a job's write and a consumer's reach it the same way.
Jobs and consumers act as the tenant's system user, which passes only where ``system`` is
one of ``bypass_roles``.

Another's row is answered as a missing one (404 ``entity_not_found``): a refusal that said
"not yours" would disclose that the row exists; a domain event on another's row stream
(``ctx.append_event``) answers the same. A confined caller may set an owner field only
to its own user id (403 ``owner_field_write_denied``): it neither makes rows for another nor
hands its own over; a create that leaves the field out has it filled in with the caller's id.
Anonymous callers share one id, so an anonymous caller owns no row.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import Connection, Select, Table, false, select

from asanoha.platform.errors import AccessDeniedError, NotFoundError, Reasons
from asanoha.platform.model import EntityDef, Registry, SessionUser
from asanoha.platform.model.access import OwnerCheck
from asanoha.platform.store import Tables

#: Which rule of the entity applies: its standard reads' or its standard writes'.
Reach = Literal["read", "write"]


@dataclass(frozen=True)
class OwnerRule:
    """Whose rows a caller reaches: those whose ``owner`` is the caller, unless the caller
    holds one of ``bypass_roles``."""

    owner: str | OwnerCheck
    bypass_roles: frozenset[str]

    def confines(self, user: SessionUser) -> bool:
        """Whether ``user`` reaches only its own rows."""
        return self.bypass_roles.isdisjoint(user.roles)

    @property
    def is_column(self) -> bool:
        """Whether the owner is a column, so the database can pick the caller's rows."""
        return isinstance(self.owner, str)


def declared_rule(registry: Registry, entity_def: EntityDef, reach: Reach) -> OwnerRule | None:
    """The owner rule the standard handlers of ``entity_def`` declare for ``reach``: their
    queries' for reads, their writes' for changes; ``None`` when they declare none."""
    kind = "query" if reach == "read" else "write"
    for handler in registry.handlers:
        binding = handler.crud
        if binding is None or handler.kind != kind or handler.feature != entity_def.feature:
            continue
        if binding.entity == entity_def.name and handler.access.owner is not None:
            return OwnerRule(handler.access.owner, handler.access.bypass_roles)
    return None


class OwnerRules:
    """The owner rules of an application's entities, each looked up once."""

    def __init__(self, registry: Registry) -> None:
        self._registry = registry
        self._rules: dict[tuple[str, Reach], OwnerRule | None] = {}

    def rule(self, entity_def: EntityDef, reach: Reach, user: SessionUser) -> OwnerRule | None:
        """The rule that confines ``user`` on ``entity_def``, or ``None`` when none does."""
        key = (entity_def.key, reach)
        if key not in self._rules:
            self._rules[key] = declared_rule(self._registry, entity_def, reach)
        rule = self._rules[key]
        return rule if rule is not None and rule.confines(user) else None


def owned_rows(
    query: Select[Any], table: Table, entity_def: EntityDef, rule: OwnerRule, user: SessionUser
) -> Select[Any]:
    """``query`` narrowed to ``user``'s rows (a function owner is asked per row by
    ``owned``, after the read)."""
    if user.is_anonymous:
        return query.where(false())
    if not isinstance(rule.owner, str):
        return query
    column = table.c[rule.owner]
    declared = entity_def.entity.fields.get(rule.owner)
    if declared is not None and declared.kind == "reference":
        # A reference field holds a UUID: a user id that is none owns no row of it.
        try:
            return query.where(column == uuid.UUID(user.id))
        except ValueError:
            return query.where(false())
    return query.where(column == user.id)


def owned(rule: OwnerRule, row: Mapping[str, Any], user: SessionUser) -> bool:
    """Whether ``user`` owns ``row``, read from the row itself."""
    if user.is_anonymous:
        return False
    if not isinstance(rule.owner, str):
        return bool(rule.owner(dict(row), user))
    value = row.get(rule.owner)
    if isinstance(value, uuid.UUID):
        try:
            return value == uuid.UUID(user.id)
        except ValueError:
            return False
    return value is not None and value == user.id


def keep_owned(
    rule: OwnerRule, rows: Iterable[dict[str, Any]], user: SessionUser
) -> list[dict[str, Any]]:
    """The rows of ``rows`` that ``user`` owns."""
    return [row for row in rows if owned(rule, row, user)]


def owner_default(
    rule: OwnerRule, entity_def: EntityDef, data: Mapping[str, Any], user: SessionUser
) -> dict[str, Any]:
    """What a confined caller's create gets filled in: its own user id in the owner field
    when ``data`` leaves it out (nothing for ``created_by``, a function, or a reference
    owner and a user id that is no UUID)."""
    name = rule.owner
    if not isinstance(name, str) or name in data or user.is_anonymous:
        return {}
    declared = entity_def.entity.fields.get(name)
    if declared is None:
        return {}
    if declared.kind == "reference":
        try:
            uuid.UUID(user.id)
        except ValueError:
            return {}
    return {name: user.id}


def check_owner_kept(
    rule: OwnerRule,
    entity_def: EntityDef,
    given: Mapping[str, Any],
    user: SessionUser,
    verb: str,
    handler_qn: str,
) -> None:
    """Refuse a confined caller's write that sets the owner field to anyone but itself."""
    name = rule.owner
    if isinstance(name, str) and name in given and not owned(rule, given, user):
        raise AccessDeniedError(
            Reasons.OWNER_FIELD_WRITE_DENIED,
            handler=handler_qn,
            entity=entity_def.key,
            verb=verb,
            fields=[name],
        )


def check_stream_owned(
    conn: Connection,
    tables: Tables,
    rules: OwnerRules,
    entity_def: EntityDef,
    user: SessionUser,
    stream_id: str,
) -> None:
    """Refuse, as a missing row, a domain event on the stream of a row ``user`` may not
    change (a row gone from its table has no owner to ask: refused too)."""
    rule = rules.rule(entity_def, "write", user)
    if rule is None:
        return
    table = tables.entity(entity_def.key)
    found = None
    try:
        row_id = uuid.UUID(stream_id)
    except ValueError:
        row_id = None
    if row_id is not None:
        query = select(table).where(table.c.tenant_id == user.tenant_id, table.c.id == row_id)
        query = owned_rows(query, table, entity_def, rule, user)
        found = conn.execute(query).mappings().first()
    if found is None or not owned(rule, dict(found), user):
        raise NotFoundError(Reasons.ENTITY_NOT_FOUND, entity=entity_def.key, id=stream_id)
