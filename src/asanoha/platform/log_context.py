"""The fields every log line of a unit of work carries: ``request_id``, ``correlation_id``,
``tenant``, ``handler`` or ``job``, ``job_id``, ``attempt``.

The service layer binds them around a top-level dispatch and the job task wrapper around
an attempt; ``log_format`` writes them into each JSON line. They mirror who is acting for
the logs only: nothing reads them to decide anything. Ids and names only, never a payload
value.
"""

from __future__ import annotations

from contextvars import ContextVar, Token
from types import MappingProxyType, TracebackType
from typing import Literal

LogField = Literal["request_id", "correlation_id", "tenant", "handler", "job", "job_id", "attempt"]
LogFields = MappingProxyType[str, str | int]

_EMPTY: LogFields = MappingProxyType({})
#: One immutable mapping per context: binding is one ``set``, reading one ``get``.
_fields: ContextVar[LogFields] = ContextVar("asanoha_log_fields", default=_EMPTY)


def log_fields() -> LogFields:
    """The fields bound in the current context."""
    return _fields.get()


def bind_log_fields(**fields: str | int | None) -> Token[LogFields]:
    """Add ``fields`` (``None`` values are left out) to the current context's; returns the
    token that ``reset_log_fields`` takes."""
    current = _fields.get()
    merged = {**current, **{name: value for name, value in fields.items() if value is not None}}
    return _fields.set(MappingProxyType(merged))


def reset_log_fields(token: Token[LogFields]) -> None:
    """Put the fields back as they were before the ``bind_log_fields`` that gave ``token``."""
    _fields.reset(token)


def clear_log_fields() -> None:
    """Forget every field (a worker thread between two tasks)."""
    _fields.set(_EMPTY)


class bound_log_fields:
    """``with bound_log_fields(tenant=..., handler=...):`` binds the fields for the block.

    A class rather than a generator-based context manager: it runs on every dispatch.
    """

    __slots__ = ("_fields", "_token")

    def __init__(self, **fields: str | int | None) -> None:
        self._fields = fields
        self._token: Token[LogFields] | None = None

    def __enter__(self) -> None:
        self._token = bind_log_fields(**self._fields)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._token is not None:
            _fields.reset(self._token)
            self._token = None
