"""Consumer operations as handlers for system administrators: status, restart, skip,
disable, enable. Add ``consumer_admin.feature`` to an application's features to expose them
(over HTTP and to agents)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel
from sqlalchemy import Connection

from asanoha.platform.consumers import ConsumerStatus, operations
from asanoha.platform.model import Access, Agent, Feature
from asanoha.platform.model.users import SYSTEM_ROLE
from asanoha.platform.service import QueryContext, WriteContext
from asanoha.platform.store import Tables, platform_tables

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
    statuses = operations.consumer_statuses(ctx.request.conn, platform_tables())
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
    event_id = operations.skip_event(ctx.request.conn, platform_tables(), payload.name)
    return {**_status_of(ctx, payload.name), "skipped_event_id": event_id}


def _consumer_operation(
    name: str, operation: Callable[[Connection, Tables, str], None], description: str
) -> Callable[[ConsumerName, WriteContext], dict[str, Any]]:
    """A mid-risk write handler that runs ``operation`` on the named consumer and answers its
    status afterwards."""

    def handler(payload: ConsumerName, ctx: WriteContext) -> dict[str, Any]:
        operation(ctx.request.conn, platform_tables(), payload.name)
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
    "Let a dead consumer try its failing event again, with fresh attempts.",
)
disable = _consumer_operation(
    "disable",
    operations.disable_consumer,
    "Stop delivering events to a consumer until it is enabled.",
)
enable = _consumer_operation(
    "enable", operations.enable_consumer, "Resume delivering events to a disabled consumer."
)


def _status_of(ctx: QueryContext, name: str) -> dict[str, Any]:
    [found] = operations.consumer_statuses(ctx.request.conn, platform_tables(), [name])
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
