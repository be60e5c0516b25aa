"""The service layer: dispatch, the entity executor, the gates and the outbox."""

from asanoha.platform.service.context import (
    EntryHandler,
    RequestContext,
    RequestMeta,
    current_request,
)
from asanoha.platform.service.dispatch import Service
from asanoha.platform.service.executor import EntityExecutor, EntityReader
from asanoha.platform.service.handler_context import QueryContext, WriteContext
from asanoha.platform.service.outbox import OutboxMessage, OutboxPublisher

__all__ = [
    "EntityExecutor",
    "EntityReader",
    "EntryHandler",
    "OutboxMessage",
    "OutboxPublisher",
    "QueryContext",
    "RequestContext",
    "RequestMeta",
    "Service",
    "WriteContext",
    "current_request",
]
