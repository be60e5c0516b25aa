"""Error classes. Each carries a stable ``code``, an HTTP status, a reason and details."""

from __future__ import annotations

from typing import Any, ClassVar

from asanoha.platform.errors.messages import developer_message
from asanoha.platform.errors.reasons import Reasons


class DefinitionError(Exception):
    """A feature, entity or handler is declared wrongly. Raised at import or boot time."""


class AsanohaError(Exception):
    """Base of every error a handler call can answer with."""

    code: ClassVar[str] = "error"
    http_status: ClassVar[int] = 500
    default_reason: ClassVar[Reasons] = Reasons.INTERNAL_ERROR

    def __init__(
        self,
        reason: Reasons | None = None,
        message: str | None = None,
        /,
        **details: Any,
    ) -> None:
        self.reason: Reasons = reason or self.default_reason
        self.details: dict[str, Any] = details
        self.message: str = message or developer_message(self.reason, details)
        super().__init__(self.message)

    def to_dict(self) -> dict[str, Any]:
        """The error as plain data (code, reason, message, details)."""
        return {
            "code": self.code,
            "reason": str(self.reason),
            "message": self.message,
            "details": self.details,
        }


class ValidationError(AsanohaError):
    """The payload does not match the handler's schema. ``details.fields`` lists each problem."""

    code = "validation_error"
    http_status = 400
    default_reason = Reasons.VALIDATION_FAILED


class AuthenticationError(AsanohaError):
    """The caller could not be identified (missing, expired or invalid token)."""

    code = "unauthenticated"
    http_status = 401
    default_reason = Reasons.TOKEN_MISSING


class AccessDeniedError(AsanohaError):
    """The caller or the entry handler may not do this. ``details.reason`` repeats the reason."""

    code = "access_denied"
    http_status = 403
    default_reason = Reasons.ROLE_REQUIRED

    def __init__(
        self,
        reason: Reasons | None = None,
        message: str | None = None,
        /,
        **details: Any,
    ) -> None:
        details.setdefault("reason", str(reason or self.default_reason))
        super().__init__(reason, message, **details)


class NotFoundError(AsanohaError):
    """The handler, row or job does not exist (for this tenant)."""

    code = "not_found"
    http_status = 404
    default_reason = Reasons.ENTITY_NOT_FOUND


class ConflictError(AsanohaError):
    """The write conflicts with the current state (unique index, deleted row)."""

    code = "conflict"
    http_status = 409
    default_reason = Reasons.UNIQUE_VIOLATION


class VersionConflictError(ConflictError):
    """The stream moved on: ``details.expected_version`` and ``details.current_version``."""

    code = "version_conflict"
    default_reason = Reasons.VERSION_CONFLICT


class PayloadTooLargeError(AsanohaError):
    """The request body is larger than the configured limit."""

    code = "payload_too_large"
    http_status = 413
    default_reason = Reasons.PAYLOAD_TOO_LARGE


class UnprocessableError(AsanohaError):
    """The payload is well-formed but the handler cannot act on it."""

    code = "unprocessable"
    http_status = 422
    default_reason = Reasons.UNPROCESSABLE


class RateLimitError(AsanohaError):
    """Too many calls; try again later."""

    code = "rate_limited"
    http_status = 429
    default_reason = Reasons.RATE_LIMITED


class ServiceUnavailableError(AsanohaError):
    """A dependency (database, broker) does not answer; ``details.checks`` says which."""

    code = "unavailable"
    http_status = 503
    default_reason = Reasons.DEPENDENCY_UNAVAILABLE


class InternalError(AsanohaError):
    """An unexpected failure. The message never carries a stack trace outside development."""

    code = "internal_error"
    http_status = 500
    default_reason = Reasons.INTERNAL_ERROR
