"""Reads of another tenant's rows: a system-scope feature's explicit, audited call.

``ctx.tenant_entity(name, tenant_id, reason=...)`` in a handler of a feature declared
``Feature(..., system_scope="<reason>")`` reads entity ``name`` in ``tenant_id`` as the caller
(its roles, read rule and field access apply there), and leaves one audit event per call,
``asanoha:audit.cross-tenant-read``, on a stream of its own in the tenant that was read: who
read which entity, from which handler and tenant, and why. Any other feature is refused (403
``cross_tenant_read_denied``) before anything is read.

The event commits at once, on its own: the read happened whatever the call does next. In a
write request on SQLite, whose one writer the request holds, it commits with the request.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from sqlalchemy import Connection

from asanoha.platform.errors import AccessDeniedError, Reasons
from asanoha.platform.model import HandlerDef, SessionUser
from asanoha.platform.service import platform_events
from asanoha.platform.service.entity_reader import EntityReader
from asanoha.platform.service.request import Request
from asanoha.platform.service.validation import invalid_field

if TYPE_CHECKING:
    from asanoha.platform.service.dispatch import Service

#: The event of a read of another tenant's rows.
CROSS_TENANT_READ = "asanoha:audit.cross-tenant-read"


def tenant_reader(
    service: Service,
    request: Request,
    handler: HandlerDef,
    user: SessionUser,
    name: str,
    tenant_id: str,
    reason: str,
) -> EntityReader:
    """Reads of entity ``name`` in ``tenant_id`` for ``user``, audited (see the module)."""
    if not service.registry.is_system_scope(handler.feature):
        raise AccessDeniedError(
            Reasons.CROSS_TENANT_READ_DENIED, handler=handler.qn, tenant=tenant_id, entity=name
        )
    if not isinstance(reason, str) or not reason.strip():
        raise invalid_field(handler.qn, "reason", "missing", "a cross-tenant read says why")
    if not isinstance(tenant_id, str) or not tenant_id:
        raise invalid_field(handler.qn, "tenant_id", "missing", "the tenant to read")
    reader = dataclasses.replace(user, tenant_id=tenant_id)
    found = service.reader(request, name, reader, feature=handler.feature, caller=handler.qn)
    payload = {
        "entity": found.entity_def.key,
        "handler": handler.qn,
        "reader": user.id,
        "reader_tenant": user.tenant_id,
        "reason": reason.strip(),
    }

    def record(conn: Connection) -> None:
        platform_events.append_audit_event(
            conn,
            service.database,
            service.tables,
            tenant_id=tenant_id,
            event_type=CROSS_TENANT_READ,
            payload=payload,
            request_id=request.request_id,
            by=user.id,
        )

    if request.kind == "write" and service.database.dialect == "sqlite":
        record(request.conn)
    else:
        with service.database.begin() as conn:
            record(conn)
    return found
