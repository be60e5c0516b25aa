"""The safety gates of the write path. Each raises ``AccessDeniedError`` or returns.

Every gate reads the explicit ``Request`` it is given. The risk gates read the entry handler
and the chain: a job or consumer that calls the executor directly has no entry handler, but
when an agent started its chain through a handler below ``high`` it may do no more than that
call could (unless it declares ``acts_for_system``).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, NoReturn

from asanoha.platform.errors import AccessDeniedError, Reasons, developer_message
from asanoha.platform.model import (
    SYSTEM_ROLE,
    EntityDef,
    HandlerDef,
    Registry,
    SessionUser,
    instruction_fields,
)
from asanoha.platform.service.request import Request


def check_irreversible(request: Request | None, operation: str, **target: str) -> None:
    """Operations that cannot be undone (a hard delete, forgetting a row or a subject) need an
    entry handler that resolves ``high`` (and, in a chain an agent began, a ``high`` call by
    the agent: see ``_risk_limit``). ``target`` names what the operation destroys:
    ``entity=`` or ``subject=``.

    Each such operation calls this itself, with the request it runs in, so that no way of
    reaching it (a nested write, a job, a bundled handler) passes around it. The executor
    calls it before any database read, so a missing id answers 403 and not 404: the gate does
    not reveal whether a row exists.
    """
    limit = _risk_limit(request)
    if limit is not None:
        _refuse(
            Reasons.IRREVERSIBLE_OPERATION_REQUIRES_HIGH_RISK,
            {**limit, "operation": operation, **target},
        )


def check_instruction_fields(
    request: Request | None, entity_def: EntityDef, verb: str, data: Collection[str]
) -> None:
    """A write carrying a ``read_as_instruction`` field needs a ``high`` entry handler (and, in
    a chain an agent began, a ``high`` call by the agent: see ``_risk_limit``).

    ``data`` is the field set after defaults and pre-save hooks; presence counts, not change.
    """
    flagged = instruction_fields(entity_def.entity)
    if not flagged:
        return
    limit = _risk_limit(request)
    if limit is None:
        return
    written = sorted(flagged & set(data))
    if written:
        _refuse(
            Reasons.INSTRUCTION_FIELD_WRITE_REQUIRES_HIGH_RISK,
            {**limit, "entity": entity_def.key, "verb": verb, "fields": written},
        )


def _risk_limit(request: Request | None) -> dict[str, Any] | None:
    """What keeps ``request`` below ``high`` (the details of a refusal), or ``None``.

    The entry handler must resolve ``high``; and when an agent began the chain, so must the
    handler it called: a mid-risk tool cannot reach a gated operation through a job or
    consumer it triggers, whatever that job then dispatches, unless the job or consumer
    declares that it acts for the system.
    """
    if request is None:
        return None
    entry = request.entry
    if entry is not None and entry.risk != "high":
        return {"handler": entry.qn, "resolved_risk": entry.risk}
    origin = request.origin
    acting = request.acting
    if not origin.agent_below_high or (acting is not None and acting.acts_for_system):
        return None
    return {
        # The handler the agent called is the one whose risk is too low.
        "handler": origin.root_qn,
        "resolved_risk": origin.entry_risk,
        "principal_kind": origin.principal_kind,
        "acting": acting.qn if acting is not None else None,
    }


def _refuse(reason: Reasons, details: dict[str, Any]) -> NoReturn:
    # What the operation acts on, for the text: an entity, or a subject's data key.
    subject = details.get("subject")
    target = f"the data key of subject {subject}" if subject else details.get("entity")
    message = developer_message(reason, {**details, "target": target})
    if "acting" in details:
        # The usual fix (a higher risk) is the agent's tool's; the job or consumer has one too.
        acting = details["acting"] or "the job or consumer"
        message += (
            f" {acting} acts in a chain an agent began with that call; if its work is the "
            f'system\'s, whoever triggered it, declare acts_for_system="<why>" on {acting}.'
        )
    raise AccessDeniedError(reason, message, **details)


def check_public_intake(
    request: Request | None, personal: Collection[str], written: Collection[str], **target: str
) -> None:
    """A chain of writes that began anonymously may write personal fields only when its root
    handler declared public intake, also in the jobs and consumers it triggered.

    ``personal``: the personal fields of what is written (an entity's fields, a domain
    event's ``pii`` map); ``written``: the fields the write carries; ``target``: ``entity=``
    or ``event=``, for the refusal's details. Entity writes and domain events both ask here.
    """
    if request is None or request.origin.may_write_personal_data:
        return
    fields = sorted(set(personal) & set(written))
    if fields:
        raise AccessDeniedError(
            Reasons.PUBLIC_INTAKE_REQUIRED,
            handler=request.origin.root_qn,
            resolved_risk=request.entry.risk if request.entry else None,
            fields=fields,
            **target,
        )


def write_in_query_denied(query: str, operation: str, target: str) -> AccessDeniedError:
    """The refusal of a write tried inside the query handler ``query``: ``operation`` (write,
    write_as, append_event, dispatch, or an entity verb) of ``target`` (the write handler,
    event, job or entity it named). Queries are listed to agents as read-only and run in a
    read-only transaction, so every way a query could write answers this 403 before it reads
    or validates anything: a query's context and entity reader raise it for each write they
    are asked for, whatever request they run in; the service raises it through
    ``check_write_allowed``."""
    return AccessDeniedError(
        Reasons.WRITE_IN_QUERY_DENIED,
        handler=query,
        query=query,
        operation=operation,
        target=target,
    )


def check_shared_write(
    registry: Registry, entity_def: EntityDef, writer: str, operation: str
) -> None:
    """Refuse (403 ``shared_row_write_denied``) ``operation`` of a shared entity's row
    (``Entity(shared=True)``: every tenant reads it) by ``writer`` (the handler, job or
    consumer QN) of a feature not declared ``system_scope=``."""
    if not entity_def.entity.shared:
        return
    feature = writer.split(":", 1)[0]
    if registry.is_system_scope(feature):
        return
    raise AccessDeniedError(
        Reasons.SHARED_ROW_WRITE_DENIED,
        handler=writer,
        entity=entity_def.key,
        operation=operation,
    )


def check_write_allowed(request: Request, operation: str, target: str) -> None:
    """Refuse a write (``operation`` of ``target``) asked of the service inside a query's
    request: its entry query is named, whoever reached past the query's context."""
    if request.kind == "query":
        query = request.entry.qn if request.entry else "a query"
        raise write_in_query_denied(query, operation, target)


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
