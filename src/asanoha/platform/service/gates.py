"""The safety gates of the write path. Each raises ``AccessDeniedError`` or returns.

Every gate passes when there is no entry handler: jobs, consumers and hooks that call the
executor directly have no caller whose risk could be too low.
"""

from __future__ import annotations

from collections.abc import Collection

from asanoha.platform.errors import AccessDeniedError, Reasons
from asanoha.platform.model import EntityDef, instruction_fields
from asanoha.platform.service.context import RequestContext


def check_irreversible(
    request: RequestContext | None, entity_def: EntityDef, operation: str
) -> None:
    """Hard delete and forget need an entry handler that resolves ``high``.

    Called before any database read, so a missing id answers 403 and not 404: the gate does
    not reveal whether a row exists.
    """
    entry = request.entry if request else None
    if entry is None or entry.risk == "high":
        return
    raise AccessDeniedError(
        Reasons.IRREVERSIBLE_OPERATION_REQUIRES_HIGH_RISK,
        handler=entry.qn,
        resolved_risk=entry.risk,
        operation=operation,
        entity=entity_def.key,
    )


def check_instruction_fields(
    request: RequestContext | None, entity_def: EntityDef, verb: str, data: Collection[str]
) -> None:
    """A write carrying a ``read_as_instruction`` field needs a ``high`` entry handler.

    ``data`` is the field set after defaults and pre-save hooks; presence counts, not change.
    """
    entry = request.entry if request else None
    if entry is None or entry.risk == "high":
        return
    written = sorted(instruction_fields(entity_def.entity) & set(data))
    if written:
        raise AccessDeniedError(
            Reasons.INSTRUCTION_FIELD_WRITE_REQUIRES_HIGH_RISK,
            handler=entry.qn,
            resolved_risk=entry.risk,
            entity=entity_def.key,
            verb=verb,
            fields=written,
        )


def check_public_intake(
    request: RequestContext | None, entity_def: EntityDef, data: Collection[str]
) -> None:
    """An anonymous root call may write personal fields only through a public-intake rule."""
    if request is None or not request.root_user.is_anonymous or request.root_access.public_intake:
        return
    written = sorted(entity_def.entity.personal_fields & set(data))
    if written:
        raise AccessDeniedError(
            Reasons.PUBLIC_INTAKE_REQUIRED,
            handler=request.entry.qn if request.entry else None,
            resolved_risk=request.entry.risk if request.entry else None,
            entity=entity_def.key,
            fields=written,
        )
