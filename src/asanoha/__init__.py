"""asanoha: a Celery-centric application platform.

Declare features (entities, write and query handlers, events, jobs, consumers); every write
goes through one service layer that checks access and the safety gates, appends events and
updates the read tables in one transaction.
"""

from typing import TYPE_CHECKING

from asanoha.app import App
from asanoha.platform.consumers import ConsumerContext, ConsumerDeadError
from asanoha.platform.errors import (
    AccessDeniedError,
    AsanohaError,
    AuthenticationError,
    ConflictError,
    DefinitionError,
    InternalError,
    NotFoundError,
    RateLimitError,
    Reasons,
    UnprocessableError,
    ValidationError,
    VersionConflictError,
)
from asanoha.platform.model import (
    Access,
    Agent,
    Backoff,
    Entity,
    Feature,
    Registry,
    SessionUser,
    fields,
    resolve_agent_exposure,
)
from asanoha.platform.service import QueryContext, RequestMeta, Service, WriteContext
from asanoha.platform.settings import Settings
from asanoha.platform.store import StoredEvent

if TYPE_CHECKING:
    from asanoha.workers import JobContext

__all__ = [
    "Access",
    "AccessDeniedError",
    "Agent",
    "App",
    "AsanohaError",
    "AuthenticationError",
    "Backoff",
    "ConflictError",
    "ConsumerContext",
    "ConsumerDeadError",
    "DefinitionError",
    "Entity",
    "Feature",
    "InternalError",
    "JobContext",
    "NotFoundError",
    "QueryContext",
    "RateLimitError",
    "Reasons",
    "Registry",
    "RequestMeta",
    "Service",
    "SessionUser",
    "Settings",
    "StoredEvent",
    "UnprocessableError",
    "ValidationError",
    "VersionConflictError",
    "WriteContext",
    "fields",
    "resolve_agent_exposure",
]


def __getattr__(name: str) -> object:
    # JobContext lives with the workers (Celery); import it only when asked for, so that
    # ``import asanoha`` stays free of Celery for code that only defines features.
    if name == "JobContext":
        from asanoha.workers import JobContext

        return JobContext
    raise AttributeError(f"module 'asanoha' has no attribute {name!r}")
