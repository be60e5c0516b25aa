"""asanoha: a Celery-centric application platform.

Declare features (entities, write and query handlers, events, jobs, consumers); every write
goes through one service layer that checks access and the safety gates, appends events and
updates the read tables in one transaction.
"""

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
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
        UnsupportedMediaTypeError,
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
        Retention,
        SessionUser,
        Snooze,
        fields,
        resolve_agent_exposure,
    )
    from asanoha.platform.model.canvas import chain, chord, group, job
    from asanoha.platform.personal import FORGOTTEN
    from asanoha.platform.personal.master_keys import KeyWrapper, LocalKeyWrapper
    from asanoha.platform.service import QueryContext, RequestMeta, Service, WriteContext
    from asanoha.platform.service.jobs import JobNotSucceededError
    from asanoha.platform.settings import Settings
    from asanoha.platform.store import StoredEvent
    from asanoha.platform.store.declared_projections import ProjectionTarget
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
    "JobNotSucceededError",
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
    "Retention",
    "Service",
    "ServiceUnavailableError",
    "SessionUser",
    "Settings",
    "Snooze",
    "StepContext",
    "StoredEvent",
    "StreamContext",
    "UnprocessableError",
    "UnsupportedMediaTypeError",
    "ValidationError",
    "VersionConflictError",
    "WorkflowFailedError",
    "WriteContext",
    "chain",
    "chord",
    "fields",
    "group",
    "job",
    "resolve_agent_exposure",
]

#: Where each public name lives. ``import asanoha`` imports none of them: every command of the
#: ``asanoha`` script starts by importing this package (``asanoha.cli`` is inside it), and the
#: application's model, service layer and bundled handlers took most of the second that
#: ``asanoha --help`` waited. A name is imported from its module the first time it is asked
#: for (PEP 562); type checkers and the API reference read the imports above.
_EXPORTS: dict[str, str] = {
    "App": "asanoha.app",
    "ConsumerContext": "asanoha.platform.consumers",
    "ConsumerDeadError": "asanoha.platform.consumers",
    "ConsumerDrainTimeoutError": "asanoha.platform.consumers",
    "AccessDeniedError": "asanoha.platform.errors",
    "AsanohaError": "asanoha.platform.errors",
    "AuthenticationError": "asanoha.platform.errors",
    "ConflictError": "asanoha.platform.errors",
    "DefinitionError": "asanoha.platform.errors",
    "InternalError": "asanoha.platform.errors",
    "NotFoundError": "asanoha.platform.errors",
    "PayloadTooLargeError": "asanoha.platform.errors",
    "RateLimitError": "asanoha.platform.errors",
    "Reasons": "asanoha.platform.errors",
    "ServiceUnavailableError": "asanoha.platform.errors",
    "UnprocessableError": "asanoha.platform.errors",
    "UnsupportedMediaTypeError": "asanoha.platform.errors",
    "ValidationError": "asanoha.platform.errors",
    "VersionConflictError": "asanoha.platform.errors",
    "StreamContext": "asanoha.platform.feed.context",
    "chain": "asanoha.platform.model.canvas",
    "chord": "asanoha.platform.model.canvas",
    "group": "asanoha.platform.model.canvas",
    "job": "asanoha.platform.model.canvas",
    "Access": "asanoha.platform.model",
    "Agent": "asanoha.platform.model",
    "AggregateDef": "asanoha.platform.model",
    "Backoff": "asanoha.platform.model",
    "Concurrency": "asanoha.platform.model",
    "Entity": "asanoha.platform.model",
    "Feature": "asanoha.platform.model",
    "fields": "asanoha.platform.model",
    "JobCancelled": "asanoha.platform.model",
    "RateLimit": "asanoha.platform.model",
    "Registry": "asanoha.platform.model",
    "Retention": "asanoha.platform.model",
    "resolve_agent_exposure": "asanoha.platform.model",
    "SessionUser": "asanoha.platform.model",
    "Snooze": "asanoha.platform.model",
    "FORGOTTEN": "asanoha.platform.personal",
    "KeyWrapper": "asanoha.platform.personal.master_keys",
    "LocalKeyWrapper": "asanoha.platform.personal.master_keys",
    "QueryContext": "asanoha.platform.service",
    "RequestMeta": "asanoha.platform.service",
    "Service": "asanoha.platform.service",
    "WriteContext": "asanoha.platform.service",
    "JobNotSucceededError": "asanoha.platform.service.jobs",
    "Settings": "asanoha.platform.settings",
    "StoredEvent": "asanoha.platform.store",
    "ProjectionTarget": "asanoha.platform.store.declared_projections",
    "DrainTimeoutError": "asanoha.workers",
    "JobContext": "asanoha.workers",
    "JobFailedError": "asanoha.workers",
    "StepContext": "asanoha.workers",
    "WorkflowFailedError": "asanoha.workers",
}


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'asanoha' has no attribute {name!r}")
    found = getattr(importlib.import_module(module), name)
    # Kept as an attribute: the next lookup does not come back here.
    globals()[name] = found
    return found


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
