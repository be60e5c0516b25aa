"""Consumer operations as handlers for system administrators: status, restart, skip,
disable, enable. Add ``consumer_admin.feature`` to an application's features to expose them
(over HTTP and to agents)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from asanoha.platform.consumers import ConsumerStatus, consumer_definitions, operations
from asanoha.platform.errors import NotFoundError, Reasons
from asanoha.platform.model import Access, Agent, ConsumerDef, Feature
from asanoha.platform.model.users import SYSTEM_ROLE
from asanoha.platform.service import QueryContext, WriteContext

SYSTEM_ADMIN_ROLE = "SystemAdmin"
#: Operators, and the system user (a job may restart a consumer).
OPERATORS = Access(roles=[SYSTEM_ADMIN_ROLE, SYSTEM_ROLE])

feature = Feature("consumer-admin")


class NoPayload(BaseModel):
    """Takes nothing."""


class ConsumerName(BaseModel):
    """Which consumer: its qualified name, e.g. ``shop:consumer:mailer``."""

    name: str


@feature.query_handler(
    "status",
    access=OPERATORS,
    description="Every event consumer with its position, lag, status, attempts and last error.",
)
def status(payload: NoPayload, ctx: QueryContext) -> list[dict[str, Any]]:
    """Every consumer's status."""
    statuses = operations.consumer_statuses(
        ctx.request.conn, ctx.service.tables, consumer_definitions(ctx.service.registry)
    )
    return [_describe(found) for found in statuses]


@feature.write_handler(
    "restart",
    access=OPERATORS,
    agent=Agent(risk="mid"),
    description="Let a dead consumer try its failing event again, with fresh attempts.",
)
def restart(payload: ConsumerName, ctx: WriteContext) -> dict[str, Any]:
    """Restart a dead consumer."""
    _consumer(ctx, payload.name)
    operations.restart_consumer(ctx.request.conn, ctx.service.tables, payload.name)
    return _status_of(ctx, payload.name)


@feature.write_handler(
    "skip",
    access=OPERATORS,
    # The skipped event is never handled by this consumer: an operator's decision.
    agent=Agent(risk="high"),
    description="Move a consumer past the event it is stopped at; the skip is recorded.",
)
def skip(payload: ConsumerName, ctx: WriteContext) -> dict[str, Any]:
    """Skip the event a consumer is stopped at."""
    _consumer(ctx, payload.name)
    event_id = operations.skip_event(ctx.request.conn, ctx.service.tables, payload.name)
    return {**_status_of(ctx, payload.name), "skipped_event_id": event_id}


@feature.write_handler(
    "disable",
    access=OPERATORS,
    agent=Agent(risk="mid"),
    description="Stop delivering events to a consumer until it is enabled.",
)
def disable(payload: ConsumerName, ctx: WriteContext) -> dict[str, Any]:
    """Disable a consumer."""
    _consumer(ctx, payload.name)
    operations.disable_consumer(ctx.request.conn, ctx.service.tables, payload.name)
    return _status_of(ctx, payload.name)


@feature.write_handler(
    "enable",
    access=OPERATORS,
    agent=Agent(risk="mid"),
    description="Resume delivering events to a disabled consumer.",
)
def enable(payload: ConsumerName, ctx: WriteContext) -> dict[str, Any]:
    """Enable a consumer."""
    _consumer(ctx, payload.name)
    operations.enable_consumer(ctx.request.conn, ctx.service.tables, payload.name)
    return _status_of(ctx, payload.name)


def _consumer(ctx: QueryContext, name: str) -> ConsumerDef:
    for consumer in consumer_definitions(ctx.service.registry):
        if consumer.qn == name:
            return consumer
    raise NotFoundError(Reasons.CONSUMER_NOT_FOUND, consumer=name)


def _status_of(ctx: QueryContext, name: str) -> dict[str, Any]:
    consumer = _consumer(ctx, name)
    [found] = operations.consumer_statuses(ctx.request.conn, ctx.service.tables, [consumer])
    return _describe(found)


def _describe(found: ConsumerStatus) -> dict[str, Any]:
    return {
        "name": found.name,
        "position": found.position,
        "lag": found.lag,
        "status": found.status,
        "attempts": found.attempts,
        "event_id": found.event_id,
        "last_error": found.last_error,
    }
