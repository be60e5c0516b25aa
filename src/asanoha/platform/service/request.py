"""The request: who is acting, through which entry handler, from which origin, in which
transaction. One is created for every top-level dispatch and passed down explicitly (handler
context -> executor -> gates); nothing re-reads it from ambient state.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from sqlalchemy import Connection

from asanoha.platform.model import Access, Risk, SessionUser

if TYPE_CHECKING:
    from asanoha.platform.service.outbox import OutboxMessage
    from asanoha.platform.store import StoredEvent

RequestKind = Literal["write", "query"]


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


@dataclass(frozen=True)
class WriteOrigin:
    """Where a chain of writes began. It travels from a write into the jobs and consumers it
    triggers, so work done later on its behalf is held to the same limits."""

    #: The outermost handler's QN (``None``: a cron or manual job).
    root_qn: str | None = None
    #: The outermost caller was anonymous.
    anonymous_root: bool = False
    #: The outermost handler's access rule declared public intake.
    public_intake: bool = False

    @classmethod
    def of_call(cls, qn: str, user: SessionUser, access: Access) -> WriteOrigin:
        """The origin of a top-level call of ``qn`` by ``user``."""
        return cls(root_qn=qn, anonymous_root=user.is_anonymous, public_intake=access.public_intake)

    @property
    def may_write_personal_data(self) -> bool:
        """An anonymous chain may write personal fields only through a public-intake rule."""
        return not self.anonymous_root or self.public_intake

    def to_header(self) -> dict[str, Any]:
        """A JSON object for job headers and event metadata."""
        return {
            "root_qn": self.root_qn,
            "anonymous_root": self.anonymous_root,
            "public_intake": self.public_intake,
        }

    @classmethod
    def from_header(cls, value: Any) -> WriteOrigin:
        """Read ``to_header``'s object back; anything else is the origin of no write."""
        if not isinstance(value, Mapping):
            return cls()
        root_qn = value.get("root_qn")
        return cls(
            root_qn=root_qn if isinstance(root_qn, str) else None,
            anonymous_root=value.get("anonymous_root") is True,
            public_intake=value.get("public_intake") is True,
        )


@dataclass
class Request:
    """One top-level dispatch (a write or a query) and everything nested in it.

    ``entry`` is ``None`` for a job's or consumer's own unit of work: no caller's risk applies
    to what it does directly, and a write it dispatches makes the target the entry handler.
    """

    conn: Connection
    #: The outermost caller.
    user: SessionUser
    kind: RequestKind
    entry: EntryHandler | None
    origin: WriteOrigin
    meta: RequestMeta = field(default_factory=RequestMeta)
    request_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    #: Outbox rows written in this transaction, published once it commits.
    outbox: list[OutboxMessage] = field(default_factory=list)
    #: Events appended in this transaction, announced to commit listeners once it commits.
    appended: list[StoredEvent] = field(default_factory=list)
    #: The human approval an agent's high-risk call runs under (recorded with provenance).
    approval_id: uuid.UUID | None = None

    def with_entry(self, entry: EntryHandler, origin: WriteOrigin | None = None) -> Request:
        """The same transaction and pending lists under another entry handler (a batch item,
        or a write dispatched from a unit of work that had none)."""
        return dataclasses.replace(self, entry=entry, origin=origin or self.origin)

    def mark(self) -> tuple[int, int]:
        """Where the pending lists stand, to undo a nested write that rolled back."""
        return len(self.outbox), len(self.appended)

    def undo_to(self, mark: tuple[int, int]) -> None:
        """Forget side effects recorded after ``mark`` (their savepoint rolled back)."""
        del self.outbox[mark[0] :]
        del self.appended[mark[1] :]
