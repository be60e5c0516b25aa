"""asanoha: a Celery-centric application platform.

Declare features (entities, write and query handlers, events, jobs, consumers); every write
goes through one service layer that checks access and the safety gates, appends events and
updates the read tables in one transaction.
"""

from typing import TYPE_CHECKING

from asanoha.app import App
from asanoha.platform.consumers import (
    ConsumerContext,
    ConsumerDeadError,
    ConsumerDrainTimeoutError,
)
from asanoha.platform.errors import (
    AccessDeniedError,
    AsanohaError,
    AuthenticationError,
    ConflictError,
    DefinitionError,
    InternalError,
    NotFoundError,
    PayloadTooLargeError,
    RateLimitError,
    Reasons,
    ServiceUnavailableError,
    UnprocessableError,
    ValidationError,
    VersionConflictError,
)
from asanoha.platform.feed.context import StreamContext
from asanoha.platform.model import (
    Access,
    Agent,
    AggregateDef,
    Backoff,
    Concurrency,
    Entity,
    Feature,
    JobCancelled,
    RateLimit,
    Registry,
    SessionUser,
    Snooze,
    fields,
    resolve_agent_exposure,
)
from asanoha.platform.personal import FORGOTTEN
from asanoha.platform.personal.master_keys import KeyWrapper, LocalKeyWrapper
from asanoha.platform.service import QueryContext, RequestMeta, Service, WriteContext
from asanoha.platform.settings import Settings
from asanoha.platform.store import StoredEvent
from asanoha.platform.store.declared_projections import ProjectionTarget

if TYPE_CHECKING:
    from asanoha.workers import (
        DrainTimeoutError,
        JobContext,
        JobFailedError,
        StepContext,
        WorkflowFailedError,
    )

__all__ = [
    "FORGOTTEN",
    "Access",
    "AccessDeniedError",
    "Agent",
    "AggregateDef",
    "App",
    "AsanohaError",
    "AuthenticationError",
    "Backoff",
    "Concurrency",
    "ConflictError",
    "ConsumerContext",
    "ConsumerDeadError",
    "ConsumerDrainTimeoutError",
    "DefinitionError",
    "DrainTimeoutError",
    "Entity",
    "Feature",
    "InternalError",
    "JobCancelled",
    "JobContext",
    "JobFailedError",
    "KeyWrapper",
    "LocalKeyWrapper",
    "NotFoundError",
    "PayloadTooLargeError",
    "ProjectionTarget",
    "QueryContext",
    "RateLimit",
    "RateLimitError",
    "Reasons",
    "Registry",
    "RequestMeta",
    "Service",
    "ServiceUnavailableError",
    "SessionUser",
    "Settings",
    "Snooze",
    "StepContext",
    "StoredEvent",
    "StreamContext",
    "UnprocessableError",
    "ValidationError",
    "VersionConflictError",
    "WorkflowFailedError",
    "WriteContext",
    "fields",
    "resolve_agent_exposure",
]


#: Names that live with the workers (Celery): imported only when asked for, so that
#: ``import asanoha`` stays free of Celery for code that only defines features.
_WORKER_NAMES = frozenset(
    {"JobContext", "JobFailedError", "DrainTimeoutError", "StepContext", "WorkflowFailedError"}
)


def __getattr__(name: str) -> object:
    if name in _WORKER_NAMES:
        import asanoha.workers

        return getattr(asanoha.workers, name)
    raise AttributeError(f"module 'asanoha' has no attribute {name!r}")
