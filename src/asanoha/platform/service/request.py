"""The request: who is acting, through which entry handler, from which origin, in which
transaction. One is created for every top-level dispatch and passed down explicitly (handler
context -> executor -> gates); nothing re-reads it from ambient state.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, cast

from sqlalchemy import Connection

from asanoha.platform.model import SYSTEM_ROLE, Access, Risk, SessionUser
from asanoha.platform.model.agent import RISK_ORDER
from asanoha.platform.model.place import Place

if TYPE_CHECKING:
    from asanoha.platform.service.instruction_reads import InstructionReads
    from asanoha.platform.service.outbox import OutboxMessage
    from asanoha.platform.store import StoredEvent

RequestKind = Literal["write", "query"]
#: Who started a chain of writes: a person, an agent acting through a principal, or the
#: platform itself (jobs without a triggering write, the system user, anonymous callers).
PrincipalKind = Literal["human", "agent", "system"]


def principal_kind(user: SessionUser) -> PrincipalKind:
    """The kind of principal ``user`` is.

    Anonymous callers count as ``system``: nobody who signed in answers for what they send.
    """
    if user.is_agent:
        return "agent"
    if SYSTEM_ROLE in user.roles or user.is_anonymous:
        return "system"
    return "human"


@dataclass(frozen=True)
class RequestMeta:
    """Ids that travel from the caller into event metadata and job headers."""

    request_id: str | None = None
    correlation_id: str | None = None
    causation_id: str | None = None
    #: The HTTP client's address (what ``RateLimit(per="ip")`` counts by).
    client_ip: str | None = None
    #: The language the caller's ``Accept-Language`` prefers (``ctx.locale``).
    locale: str | None = None
    #: The time zone the chain asked for (a job's writes: the one its write carried).
    zoneinfo: str | None = None

    def place_of(self, user: SessionUser) -> Place:
        """What ``user`` asked for in this request: the request's locale and zone over the
        token's."""
        return Place(self.locale or user.locale, self.zoneinfo or user.zoneinfo)


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
    #: The outermost caller's id (``None``: a cron or manual job).
    principal: str | None = None
    #: What kind of principal the outermost caller was.
    principal_kind: PrincipalKind = "system"
    #: The agent run of an agent principal.
    agent_run: str | None = None
    #: The outermost handler's resolved risk.
    entry_risk: Risk | None = None

    @classmethod
    def of_call(cls, qn: str, user: SessionUser, access: Access, risk: Risk) -> WriteOrigin:
        """The origin of a top-level call of ``qn`` (resolving ``risk``) by ``user``."""
        return cls(
            root_qn=qn,
            anonymous_root=user.is_anonymous,
            public_intake=access.public_intake,
            principal=user.id,
            principal_kind=principal_kind(user),
            agent_run=user.agent,
            entry_risk=risk,
        )

    @property
    def may_write_personal_data(self) -> bool:
        """An anonymous chain may write personal fields only through a public-intake rule."""
        return not self.anonymous_root or self.public_intake

    @property
    def agent_below_high(self) -> bool:
        """An agent started the chain through a handler below ``high``: the jobs and consumers
        acting for it may not do what that call could not (irreversible operations,
        instruction-field writes)."""
        return self.principal_kind == "agent" and self.entry_risk != "high"

    def to_header(self) -> dict[str, Any]:
        """A JSON object for job headers and event metadata."""
        return {
            "root_qn": self.root_qn,
            "anonymous_root": self.anonymous_root,
            "public_intake": self.public_intake,
            "principal": self.principal,
            "principal_kind": self.principal_kind,
            "agent_run": self.agent_run,
            "entry_risk": self.entry_risk,
        }

    @classmethod
    def from_header(cls, value: Any) -> WriteOrigin:
        """Read ``to_header``'s object back; anything else is the origin of no write.

        Headers written before the principal was carried read as a chain the platform
        started, as they were treated when they were written.
        """
        if not isinstance(value, Mapping):
            return cls()
        root_qn = value.get("root_qn")
        principal = value.get("principal")
        agent_run = value.get("agent_run")
        return cls(
            root_qn=root_qn if isinstance(root_qn, str) else None,
            anonymous_root=value.get("anonymous_root") is True,
            public_intake=value.get("public_intake") is True,
            principal=principal if isinstance(principal, str) else None,
            principal_kind=_principal_kind_of(value.get("principal_kind")),
            agent_run=agent_run if isinstance(agent_run, str) else None,
            entry_risk=_risk_of(value.get("entry_risk")),
        )


@dataclass(frozen=True)
class Acting:
    """The job or consumer a unit of work runs, as the gates see it."""

    qn: str
    #: Why it acts for the system rather than for the chain's principal (``acts_for_system``):
    #: then a chain an agent started below ``high`` does not limit what it does.
    acts_for_system: str | None = None


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
    #: (tenant, stream) -> the version ``ctx.fetch_for_writing`` read: the events the
    #: handler appends to the stream are expected right after it (409 when another writer
    #: appended in between). Moves with each append.
    held_versions: dict[tuple[str, str], int] = field(default_factory=dict)
    #: The human approval an agent's high-risk call runs under (recorded with provenance).
    approval_id: uuid.UUID | None = None
    #: The job or consumer this unit of work runs for (``None``: a caller's own dispatch).
    acting: Acting | None = None
    #: Collects the instruction fields this call reads and returns, when someone labels its
    #: result (MCP tool calls); ``None``: nobody asked, nothing is collected.
    reads: InstructionReads | None = None
    #: Collects the files this call shows with a signed link, as (tenant, file id), when its
    #: answer is kept under an idempotency key: a repeat answered from the kept outcome
    #: mints their links again (``KeyedWrites``); ``None``: nobody keeps it.
    linked: list[tuple[str, str]] | None = None
    #: The subjects whose files a forget in this transaction marked deleted, and the rows
    #: deleted for good with their files: their content is deleted after the commit (what is deleted is read from the committed rows, never
    #: from here). A list, so that the copies a batch item or a unit of work's write makes
    #: (``with_entry``) add to the one the commit reads.
    files_forgotten: list[str] = field(default_factory=list)

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

    def view(self) -> RequestView:
        """What a handler may see of this request (``ctx.request``)."""
        return RequestView(
            user=self.user,
            kind=self.kind,
            entry=self.entry,
            origin=self.origin,
            meta=self.meta,
            request_id=self.request_id,
            approval_id=self.approval_id,
            acting=self.acting,
        )


@dataclass(frozen=True)
class RequestView:
    """A handler's view of its request (``ctx.request``): who acts, through which entry
    handler, from which origin, under which ids.

    Not the connection, nor the pending outbox and events: a handler writes through
    ``ctx.entity``, ``ctx.write`` and ``ctx.append_event``, which record the event, the
    provenance and the gates, and runs SQL of its own only through ``ctx.sql``.
    """

    user: SessionUser
    kind: RequestKind
    entry: EntryHandler | None
    origin: WriteOrigin
    meta: RequestMeta
    request_id: str
    approval_id: uuid.UUID | None
    acting: Acting | None


def _principal_kind_of(value: Any) -> PrincipalKind:
    return "human" if value == "human" else "agent" if value == "agent" else "system"


def _risk_of(value: Any) -> Risk | None:
    return cast("Risk", value) if isinstance(value, str) and value in RISK_ORDER else None
