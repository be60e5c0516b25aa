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
    #: The QN patterns a scoped token (a personal access token) may call; ``None``: any
    #: handler its roles admit.
    scopes: frozenset[str] | None = None
    #: The scopes alone admit (a token an operator made without roles): a handler whose
    #: scopes match admits the caller as its roles would, unless only ``system`` may call it.
    scopes_grant: bool = False
    #: The ``jti`` and ``exp`` of the token the caller presented (to revoke it); not part of
    #: who the caller is.
    token_id: str | None = field(default=None, compare=False)
    token_expires: int | None = field(default=None, compare=False)

    @property
    def is_agent(self) -> bool:
        """Whether an agent acts through this principal."""
        return self.agent is not None

    def as_agent(self, run: str) -> SessionUser:
        """The same principal, marked as acting for the agent run ``run``."""
        return dataclasses.replace(self, agent=run or "agent")

    def with_token(self, jti: str, expires: int) -> SessionUser:
        """The same principal, noting the ``jti`` and ``exp`` of the token it presented."""
        return dataclasses.replace(self, token_id=jti, token_expires=expires)

    def with_scopes(self, scopes: frozenset[str], *, grant: bool = False) -> SessionUser:
        """The same principal, limited to handlers matching ``scopes`` (QN patterns);
        ``grant``: admitted to them without roles."""
        return dataclasses.replace(self, scopes=scopes, scopes_grant=grant)

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
