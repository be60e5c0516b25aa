"""Errors: classes with stable codes, the reason catalogue and its translations."""

from asanoha.platform.errors.exceptions import (
    AccessDeniedError,
    AsanohaError,
    AuthenticationError,
    ConflictError,
    DefinitionError,
    InternalError,
    NotFoundError,
    PayloadTooLargeError,
    RateLimitError,
    ServiceUnavailableError,
    UnprocessableError,
    UnsupportedMediaTypeError,
    ValidationError,
    VersionConflictError,
)
from asanoha.platform.errors.messages import developer_message, pick_language, render
from asanoha.platform.errors.reasons import Reasons

__all__ = [
    "AccessDeniedError",
    "AsanohaError",
    "AuthenticationError",
    "ConflictError",
    "DefinitionError",
    "InternalError",
    "NotFoundError",
    "PayloadTooLargeError",
    "RateLimitError",
    "Reasons",
    "ServiceUnavailableError",
    "UnprocessableError",
    "UnsupportedMediaTypeError",
    "ValidationError",
    "VersionConflictError",
    "developer_message",
    "pick_language",
    "render",
]
