"""Consumer operations as handlers: status, restart, skip, disable, enable. Add
``consumer_admin.feature`` to an application's features to expose them (over HTTP and to
agents).

A consumer's cursor is one for the whole application: every tenant's events pass through
it. So what changes a cursor is for the application's operators, not a tenant's: the
``SystemAdmin`` role (or the system user) in the operator tenant, which
``ASANOHA_OPERATOR_TENANT`` names (unset: nobody over HTTP; ``asanoha consumers`` still
works). A ``SystemAdmin`` of any other tenant may read the status as that tenant sees it:
the lag of its own events, and the event a consumer is stopped at (with its error) only when
it is one of its own; another tenant's error text never shows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field
from sqlalchemy import Connection

from asanoha.platform.consumers import ConsumerStatus, operations
from asanoha.platform.errors import AccessDeniedError, Reasons
from asanoha.platform.model import Access, Agent, Feature
from asanoha.platform.model.users import SYSTEM_ROLE
from asanoha.platform.service import QueryContext, WriteContext
from asanoha.platform.service.handler_context import platform_request
from asanoha.platform.store import Tables, platform_tables

SYSTEM_ADMIN_ROLE = "SystemAdmin"
#: System administrators, and the system user (a job may restart a consumer). The operations
#: also need the operator tenant.
OPERATORS = Access(roles=[SYSTEM_ADMIN_ROLE, SYSTEM_ROLE])

feature = Feature("consumer-admin")


class NoPayload(BaseModel):
    """Takes nothing."""


class ConsumerName(BaseModel):
    """Which consumer: its qualified name, e.g. ``shop:consumer:mailer``, and for a
    partitioned one optionally which partition (default: every partition)."""

    name: str
    partition: int | None = Field(default=None, ge=0)


@feature.query_handler(
    "status",
    access=OPERATORS,
    replica=True,
    description=(
        "Every event consumer with its position, lag, status, attempts, last error and next "
        "attempt; outside the operator tenant, as the caller's tenant sees it."
    ),
)
def status(payload: NoPayload, ctx: QueryContext) -> list[dict[str, Any]]:
    """Every consumer's status: all of it for an operator, the caller's tenant's view else."""
    tenant = None if ctx.in_operator_tenant else ctx.tenant_id
    statuses = operations.consumer_statuses(
        platform_request(ctx).conn, platform_tables(), tenant_id=tenant
    )
    return [_describe(found) for found in statuses]


@feature.write_handler(
    "skip",
    access=OPERATORS,
    # The skipped event is never handled by this consumer: an operator's decision.
    agent=Agent(risk="high"),
    description="Move a consumer past the event it is stopped at; the skip is recorded.",
)
def skip(payload: ConsumerName, ctx: WriteContext) -> dict[str, Any]:
    """Skip the event a consumer is stopped at."""
    _require_operator(ctx)
    event_id = operations.skip_event(
        platform_request(ctx).conn, platform_tables(), payload.name, payload.partition
    )
    return {**_status_of(ctx, payload.name), "skipped_event_id": event_id}


def _consumer_operation(
    name: str, operation: Callable[[Connection, Tables, str, int | None], None], description: str
) -> Callable[[ConsumerName, WriteContext], dict[str, Any]]:
    """A mid-risk write handler that runs ``operation`` on the named consumer and answers its
    status afterwards."""

    def handler(payload: ConsumerName, ctx: WriteContext) -> dict[str, Any]:
        _require_operator(ctx)
        operation(platform_request(ctx).conn, platform_tables(), payload.name, payload.partition)
        return _status_of(ctx, payload.name)

    handler.__name__ = handler.__qualname__ = name
    handler.__doc__ = description
    register = feature.write_handler(
        name, access=OPERATORS, agent=Agent(risk="mid"), description=description
    )
    return register(handler)


restart = _consumer_operation(
    "restart",
    operations.restart_consumer,
    "Let a consumer stopped at an event (dead, or waiting for its next attempt) try it again "
    "at once, with fresh attempts.",
)
disable = _consumer_operation(
    "disable",
    operations.disable_consumer,
    "Stop delivering events to a consumer until it is enabled.",
)
enable = _consumer_operation(
    "enable",
    operations.enable_consumer,
    "Resume delivering events to a disabled consumer; one that was dead stays dead until it "
    "is restarted or skips its event.",
)


def _require_operator(ctx: QueryContext) -> None:
    """Refuse a caller outside the operator tenant: a cursor is every tenant's."""
    if not ctx.in_operator_tenant:
        raise AccessDeniedError(Reasons.OPERATOR_REQUIRED, handler=ctx.handler.qn)


def _status_of(ctx: QueryContext, name: str) -> dict[str, Any]:
    [found] = operations.consumer_statuses(platform_request(ctx).conn, platform_tables(), [name])
    return _describe(found)


def _describe(found: ConsumerStatus) -> dict[str, Any]:
    described = {
        "name": found.name,
        "position": found.position,
        "lag": found.lag,
        "parked": found.parked,
        "status": found.status,
        "attempts": found.attempts,
        "event_id": found.event_id,
        "last_error": found.last_error,
        "event_tenant": found.event_tenant,
        "next_attempt_at": (
            None if found.next_attempt_at is None else found.next_attempt_at.isoformat()
        ),
    }
    if found.partitions:
        # A partitioned consumer: the sum above, and each partition as it is.
        described["partitions"] = [
            {**_describe(part), "partition": part.partition} for part in found.partitions
        ]
    return described
