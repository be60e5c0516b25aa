"""The ``SessionUser`` a verified token's claims name.

The platform's own tokens carry ``sub``, ``tenant``, ``roles`` and ``agent``; a provider's
name the same things in claims set by ``ASANOHA_JWT_SUBJECT_CLAIM``, ``_TENANT_CLAIM`` and
``_ROLES_CLAIM`` (a dotted path such as ``realm_access.roles`` reaches into an object).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from asanoha.platform.errors import AuthenticationError, Reasons
from asanoha.platform.model import SYSTEM_ROLE, SessionUser
from asanoha.platform.model.place import with_place_claims
from asanoha.platform.settings import Settings

#: The width of the tenant and user columns (tenant_id, created_by, ...): a longer id could
#: not be recorded with a write, so it is refused here rather than blamed on the payload.
MAX_ID_LENGTH = 64
MAX_ROLES = 100
# Printable text only: no control characters (NUL included) and no lone surrogates.
IDENTIFIER = re.compile(f"[^\\x00-\\x1f\\x7f\\ud800-\\udfff]{{1,{MAX_ID_LENGTH}}}")

SYSTEM_ROLE_REFUSED = (
    f"claim 'roles' may not hold {SYSTEM_ROLE!r}: it is the platform's own identity for jobs "
    "and consumers, never a caller's; give an operator the SystemAdmin role instead"
)


def refused(cause: str, error: str) -> AuthenticationError:
    """``token_invalid`` with ``details.cause`` (a short key a client can branch on) and
    ``details.error`` (what to fix)."""
    return AuthenticationError(Reasons.TOKEN_INVALID, error=error, cause=cause)


@dataclass(frozen=True)
class ClaimMap:
    """Where a token names its user, tenant and roles."""

    subject: str = "sub"
    tenant: str = "tenant_id"
    roles: str = "roles"
    #: A token without the roles claim is refused (a provider's); else it holds no role.
    requires_roles: bool = True

    @classmethod
    def of(cls, settings: Settings) -> ClaimMap:
        return cls(
            subject=settings.jwt_subject_claim,
            tenant=settings.jwt_tenant_claim,
            roles=settings.jwt_roles_claim,
        )


#: The platform's own tokens: ``tenant`` (as issued since the first release).
OWN_CLAIMS = ClaimMap(subject="sub", tenant="tenant", roles="roles", requires_roles=False)


def claim_at(claims: dict[str, Any], path: str) -> Any:
    """The value at a dotted ``path`` (``None`` where it is missing). A claim whose own
    name holds the dots wins over the path."""
    if path in claims:
        return claims[path]
    value: Any = claims
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def user_from_claims(claims: dict[str, Any], names: ClaimMap) -> SessionUser:
    """The user of verified ``claims``; raises ``AuthenticationError`` (``token_invalid``,
    ``details.cause`` ``claims``) for a missing or malformed one, or the ``system`` role."""
    subject = _identifier(claim_at(claims, names.subject), names.subject)
    tenant = _identifier(claim_at(claims, names.tenant), names.tenant)
    roles = claim_at(claims, names.roles)
    if roles is None and not names.requires_roles:
        roles = []
    if (
        not isinstance(roles, list)
        or len(roles) > MAX_ROLES
        or not all(isinstance(role, str) and IDENTIFIER.fullmatch(role) for role in roles)
    ):
        raise refused(
            "claims",
            f"claim {names.roles!r} must be a list of at most {MAX_ROLES} role names "
            f"(1 to {MAX_ID_LENGTH} printable characters each)",
        )
    if SYSTEM_ROLE in roles:
        raise refused("claims", SYSTEM_ROLE_REFUSED)
    user = with_place_claims(SessionUser.of(subject, tenant, roles), claims)
    agent = claims.get("agent")
    if agent is None or agent is False:
        return user
    if agent is True or (isinstance(agent, str) and agent):
        # An agent principal: the claim names its run (``true`` when the issuer names none).
        return user.as_agent("agent" if agent is True else agent)
    raise refused("claims", "claim 'agent' must be a non-empty string or true")


def _identifier(value: Any, claim: str) -> str:
    if not isinstance(value, str) or not IDENTIFIER.fullmatch(value):
        raise refused(
            "claims",
            f"claim {claim!r} must be a string of 1 to {MAX_ID_LENGTH} printable characters",
        )
    return value
