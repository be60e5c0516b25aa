"""The safety gates of the write path. Each raises ``AccessDeniedError`` or returns.

Every gate reads the explicit ``Request`` it is given. The risk gates pass when there is no
entry handler: jobs, consumers and hooks that call the executor directly have no caller whose
risk could be too low.
"""

from __future__ import annotations

from collections.abc import Collection

from asanoha.platform.errors import AccessDeniedError, Reasons
from asanoha.platform.model import (
    SYSTEM_ROLE,
    EntityDef,
    HandlerDef,
    SessionUser,
    instruction_fields,
)
from asanoha.platform.service.request import Request


def check_irreversible(request: Request | None, entity_def: EntityDef, operation: str) -> None:
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
    request: Request | None, entity_def: EntityDef, verb: str, data: Collection[str]
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
    request: Request | None, entity_def: EntityDef, data: Collection[str]
) -> None:
    """A chain of writes that began anonymously may write personal fields only when its root
    handler declared public intake, also in the jobs and consumers it triggered."""
    if request is None or request.origin.may_write_personal_data:
        return
    written = sorted(entity_def.entity.personal_fields & set(data))
    if written:
        raise AccessDeniedError(
            Reasons.PUBLIC_INTAKE_REQUIRED,
            handler=request.origin.root_qn,
            resolved_risk=request.entry.risk if request.entry else None,
            entity=entity_def.key,
            fields=written,
        )


def check_write_allowed(parent: Request, handler: HandlerDef) -> None:
    """A write cannot run inside a query: queries are listed to agents as read-only."""
    if parent.kind == "query":
        raise AccessDeniedError(
            Reasons.WRITE_IN_QUERY_DENIED,
            handler=handler.qn,
            query=parent.entry.qn if parent.entry else None,
        )


def check_identity_switch(handler: HandlerDef, caller: SessionUser, target: SessionUser) -> None:
    """``ctx.write_as``: only the caller's tenant and a subset of the caller's roles, unless
    the handler declares ``identity_switch``; the system identity needs ``system_identity``."""
    if target == caller:
        return
    if SYSTEM_ROLE in target.roles and SYSTEM_ROLE not in caller.roles:
        if handler.system_identity:
            return
        raise AccessDeniedError(
            Reasons.SYSTEM_IDENTITY_SWITCH_DENIED, handler=handler.qn, user=target.id
        )
    narrower = (
        target.tenant_id == caller.tenant_id
        and target.roles <= caller.roles
        and (target.is_anonymous or not caller.is_anonymous)
    )
    if narrower or handler.identity_switch:
        return
    raise AccessDeniedError(
        Reasons.IDENTITY_SWITCH_DENIED,
        handler=handler.qn,
        user=target.id,
        tenant=target.tenant_id,
        roles=sorted(target.roles - caller.roles),
    )
