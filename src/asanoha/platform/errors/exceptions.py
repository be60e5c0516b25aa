"""Error classes. Each carries a stable ``code``, an HTTP status, a reason and details."""

from __future__ import annotations

from typing import Any, ClassVar

from asanoha.platform.errors.messages import developer_message, placeholders
from asanoha.platform.errors.reasons import Reasons

#: At most this many field problems in an error's text; ``details.fields`` keeps every one.
SHOWN_FIELDS = 10


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
        #: Whether ``message`` is the reason's text, which already says the details it fills in.
        self._templated = message is None
        super().__init__(self.message)

    def __str__(self) -> str:
        """The message, then the reason and every detail the message does not already say.

        The one text of the error: the worker's log, a job run's stored error, drain()'s
        ``JobFailedError`` and the command line all print ``str()``, so what is wrong (for a
        validation error, each field and its problem) reaches each of them from here.
        """
        told = [f"reason: {self.reason}", *self.described_details()]
        return f"{self.message} [{'; '.join(told)}]"

    def __repr__(self) -> str:
        # Celery's worker log shows repr() of the exception a task raised, not str().
        return f"{type(self).__name__}({str(self)!r})"

    def described_details(self) -> list[str]:
        """``name: value`` for each detail the message does not fill in."""
        said = placeholders(self.reason) if self._templated else frozenset()
        return [
            f"{name}: {_plain(value)}"
            for name, value in self.details.items()
            if name not in said and not (name == "reason" and value == str(self.reason))
        ]

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

    def described_details(self) -> list[str]:
        """Each field problem as ``path: message (type)``, then the other details."""
        others = [line for line in super().described_details() if not line.startswith("fields:")]
        fields = self.details.get("fields")
        if not isinstance(fields, list):
            return others
        problems = [_field_problem(field) for field in fields[:SHOWN_FIELDS]]
        if len(fields) > SHOWN_FIELDS:
            problems.append(f"and {len(fields) - SHOWN_FIELDS} more in details.fields")
        return [*problems, *others]


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


class UnsupportedMediaTypeError(AsanohaError):
    """The request's content is of a type this endpoint does not take (an upload)."""

    code = "unsupported_media_type"
    http_status = 415
    default_reason = Reasons.FILE_TYPE_NOT_ALLOWED


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


def _field_problem(field: Any) -> str:
    if not isinstance(field, dict):
        return _plain(field)
    text = f"{field.get('path', '$')}: {field.get('message', 'invalid')}"
    return f"{text} ({field['type']})" if field.get("type") else text


def _plain(value: Any) -> str:
    if isinstance(value, list | tuple | set | frozenset):
        return ", ".join(_plain(item) for item in value)
    return str(value)
