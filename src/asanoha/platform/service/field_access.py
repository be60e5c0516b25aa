"""Field access: which fields of a row a caller may read and write.

A field declared ``read=Access(...)`` is left out of every row the entity executor hands to
a caller it does not admit, so it never reaches a handler's result: not the HTTP answer, not
an MCP tool result, not a job's ``ctx.trigger.result``. Sorting or filtering by it would
disclose its values one comparison at a time, so both are refused (403
``field_read_denied``); a search matches only the fields the caller may read (on Postgres
such a search cannot use the index of all searchable fields).

A field declared ``write=Access(...)`` may be written only by a caller it admits; a write
naming it is refused (403 ``field_write_denied``) before anything is written. Presence in
the data counts, not whether the value changes; defaults and pre-save hooks (the
application's own values) are not the caller's.

The rules hold for every caller, jobs and consumers (the system user) included: a rule that
should let them through lists the role ``system``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal

from asanoha.platform.errors import AccessDeniedError, Reasons
from asanoha.platform.model import Access, EntityDef, SessionUser
from asanoha.platform.model.kept import kept

_NONE: frozenset[str] = frozenset()


def _ruled(entity_def: EntityDef, use: Literal["read", "write"]) -> tuple[tuple[str, Access], ...]:
    """The fields of ``entity_def`` with a ``use`` rule, and the rule (kept: every write and
    read asks, and most entities have none)."""
    entity = entity_def.entity
    return kept(
        entity,
        f"{use}_ruled_fields",
        lambda: tuple(
            (name, rule)
            for name, declared in entity.fields.items()
            if (rule := getattr(declared, use)) is not None
        ),
    )


def hidden_fields(entity_def: EntityDef, user: SessionUser) -> frozenset[str]:
    """The fields of ``entity_def`` that ``user`` may not read."""
    ruled = _ruled(entity_def, "read")
    if not ruled:
        return _NONE
    return frozenset(name for name, rule in ruled if not rule.admits(user))


def without_hidden(row: dict[str, Any], hidden: frozenset[str]) -> dict[str, Any]:
    """``row`` without the ``hidden`` fields (``row`` itself when none is hidden)."""
    if not hidden:
        return row
    return {name: value for name, value in row.items() if name not in hidden}


def check_readable(
    entity_def: EntityDef, user: SessionUser, name: str, use: str, handler_qn: str
) -> None:
    """Refuse to ``use`` (sort, filter) field ``name`` when ``user`` may not read it."""
    if name in hidden_fields(entity_def, user):
        raise AccessDeniedError(
            Reasons.FIELD_READ_DENIED,
            handler=handler_qn,
            entity=entity_def.key,
            use=use,
            fields=[name],
        )


def readable_fields(
    entity_def: EntityDef, user: SessionUser, names: Sequence[str], use: str, handler_qn: str
) -> list[str]:
    """The fields of ``names`` that ``user`` may read, for a ``use`` (search) that spans
    several: it matches only those; none at all is refused."""
    hidden = hidden_fields(entity_def, user)
    readable = [name for name in names if name not in hidden]
    if names and not readable:
        raise AccessDeniedError(
            Reasons.FIELD_READ_DENIED,
            handler=handler_qn,
            entity=entity_def.key,
            use=use,
            fields=list(names),
        )
    return readable


def check_writable(
    entity_def: EntityDef, user: SessionUser, names: Iterable[str], verb: str, handler_qn: str
) -> None:
    """Refuse a ``verb`` that writes fields of ``names`` that ``user`` may not write."""
    if not _ruled(entity_def, "write"):
        return
    fields = entity_def.entity.fields
    denied = []
    for name in sorted(set(names)):
        rule = fields[name].write if name in fields else None
        if rule is not None and not rule.admits(user):
            denied.append(name)
    if denied:
        raise AccessDeniedError(
            Reasons.FIELD_WRITE_DENIED,
            handler=handler_qn,
            entity=entity_def.key,
            verb=verb,
            fields=denied,
        )
