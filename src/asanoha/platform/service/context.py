"""The request context: one per top-level dispatch, shared by its nested writes."""

from __future__ import annotations

import uuid
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqlalchemy import Connection

from asanoha.platform.model import Access, Risk, SessionUser

if TYPE_CHECKING:
    from asanoha.platform.service.outbox import OutboxMessage
    from asanoha.platform.store import StoredEvent


@dataclass(frozen=True)
class RequestMeta:
    """Ids that travel from the caller into event metadata and job headers."""

    request_id: str | None = None
    correlation_id: str | None = None
    causation_id: str | None = None


@dataclass(frozen=True)
class EntryHandler:
    """The handler the caller invoked directly. Nested writes keep it; the gates read it."""

    qn: str
    risk: Risk


@dataclass
class RequestContext:
    """State of one top-level write: its transaction, entry handler and pending side effects."""

    conn: Connection
    root_user: SessionUser
    root_access: Access
    entry: EntryHandler | None
    meta: RequestMeta
    request_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    #: Outbox rows written in this transaction, published once it commits.
    outbox: list[OutboxMessage] = field(default_factory=list)
    #: Events appended in this transaction, announced to commit listeners once it commits.
    appended: list[StoredEvent] = field(default_factory=list)

    def mark(self) -> tuple[int, int]:
        """Where the pending lists stand, to undo a nested write that rolled back."""
        return len(self.outbox), len(self.appended)

    def undo_to(self, mark: tuple[int, int]) -> None:
        """Forget side effects recorded after ``mark`` (their savepoint rolled back)."""
        del self.outbox[mark[0] :]
        del self.appended[mark[1] :]


_current: ContextVar[RequestContext | None] = ContextVar("asanoha_request", default=None)


def current_request() -> RequestContext | None:
    """The request context of the running write, or ``None`` outside one."""
    return _current.get()


def enter_request(request: RequestContext | None) -> object:
    """Make ``request`` current; pass the returned token to ``leave_request``."""
    return _current.set(request)


def leave_request(token: object) -> None:
    """Restore the request context that was current before ``enter_request``."""
    _current.reset(token)  # type: ignore[arg-type]
