"""The service layer: dispatch, the entity executor, the gates and the outbox."""

from asanoha.platform.service.dispatch import Service
from asanoha.platform.service.entity_reader import EntityReader
from asanoha.platform.service.executor import EntityExecutor
from asanoha.platform.service.handler_context import QueryContext, WriteContext
from asanoha.platform.service.outbox import OutboxMessage, OutboxPublisher
from asanoha.platform.service.request import EntryHandler, Request, RequestMeta, WriteOrigin

__all__ = [
    "EntityExecutor",
    "EntityReader",
    "EntryHandler",
    "OutboxMessage",
    "OutboxPublisher",
    "QueryContext",
    "Request",
    "RequestMeta",
    "Service",
    "WriteContext",
    "WriteOrigin",
]
