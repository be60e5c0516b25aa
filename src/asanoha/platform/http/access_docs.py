"""What the OpenAPI document tells about row ownership and field access.

An operation of an entity's standard handler carries ``x-asanoha-owner`` (whose rows a
caller reaches) and ``x-asanoha-fields`` (the fields only some callers read or write: a
list's and a detail's answers leave out what the caller may not read). The payload models
mark the same fields one by one (``x-asanoha-read``, ``x-asanoha-write``; see
``model.entity``).
"""

from __future__ import annotations

from typing import Any

from asanoha.platform.model import HandlerDef, Registry
from asanoha.platform.model.access import Access


def describe_owner(access: Access) -> str:
    """Whose rows ``access`` lets a caller reach, in words."""
    owner = access.owner
    if isinstance(owner, str):
        mine = f"only rows whose {owner} is the caller's user id"
    else:
        name = getattr(owner, "__qualname__", None) or repr(owner)
        mine = f"only rows {name}(row, user) accepts"
    if access.bypass_roles:
        return f"{mine}; roles {', '.join(sorted(access.bypass_roles))} reach every row"
    return mine


def access_extensions(handler: HandlerDef, registry: Registry | None) -> dict[str, Any]:
    """The ``x-asanoha-owner`` and ``x-asanoha-fields`` extensions of ``handler``'s operation."""
    extensions: dict[str, Any] = {}
    if handler.access.owner is not None:
        extensions["x-asanoha-owner"] = describe_owner(handler.access)
    if handler.crud is None or registry is None:
        return extensions
    entity_def = registry.find_entity(f"{handler.feature}:{handler.crud.entity}")
    if entity_def is None:
        return extensions
    guarded: dict[str, dict[str, str]] = {}
    for name, declared in entity_def.entity.fields.items():
        rules = {"read": declared.read, "write": declared.write}
        described = {use: rule.describe() for use, rule in rules.items() if rule is not None}
        if described:
            guarded[name] = described
    if guarded:
        extensions["x-asanoha-fields"] = guarded
    return extensions
