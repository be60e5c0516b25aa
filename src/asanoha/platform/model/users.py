"""The caller of a handler."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field

SYSTEM_ROLE = "system"
SYSTEM_USER_ID = "system"
ANONYMOUS_USER_ID = "anonymous"


@dataclass(frozen=True)
class SessionUser:
    """Who calls: an id, the tenant (always from the session, never the payload), roles."""

    id: str
    tenant_id: str
    roles: frozenset[str] = field(default_factory=frozenset)
    is_anonymous: bool = False
    #: Set when an agent acts (a token with an ``agent`` claim, or any MCP session): the agent
    #: run it acts for. ``None``: a human (or the system user). High-risk writes by an agent
    #: principal need a human's approval token.
    agent: str | None = None
    #: The locale and time zone the caller's token names (claims ``locale`` and
    #: ``zoneinfo``), for ``ctx.locale`` and ``ctx.tz``; ``None``: not named.
    locale: str | None = None
    zoneinfo: str | None = None

    @property
    def is_agent(self) -> bool:
        """Whether an agent acts through this principal."""
        return self.agent is not None

    def as_agent(self, run: str) -> SessionUser:
        """The same principal, marked as acting for the agent run ``run``."""
        return dataclasses.replace(self, agent=run or "agent")

    @classmethod
    def of(cls, id: str, tenant_id: str, roles: Iterable[str] = ()) -> SessionUser:
        """A signed-in user."""
        return cls(id=id, tenant_id=tenant_id, roles=frozenset(roles))

    @classmethod
    def system(cls, tenant_id: str) -> SessionUser:
        """The system user of a tenant. It holds the role ``system`` and nothing else."""
        return cls(id=SYSTEM_USER_ID, tenant_id=tenant_id, roles=frozenset({SYSTEM_ROLE}))

    @classmethod
    def anonymous(cls, tenant_id: str) -> SessionUser:
        """A caller without a session."""
        return cls(id=ANONYMOUS_USER_ID, tenant_id=tenant_id, is_anonymous=True)
