"""Token scopes: qualified-name patterns (``crm:write:*``, ``crm:query:contact:list``) that
limit which handlers a scoped token may call, on top of what its roles admit."""

from __future__ import annotations

import re
from collections.abc import Iterable
from fnmatch import fnmatchcase

from asanoha.platform.model.access import Access
from asanoha.platform.model.users import SYSTEM_ROLE, SessionUser

#: A QN with ``*`` wildcards (each matches any run of characters, colons included).
SCOPE_PATTERN = re.compile(r"[a-z*][a-z0-9*-]*(:[a-z0-9*][a-z0-9.*-]*)*")


def scopes_admit(scopes: Iterable[str], qn: str) -> bool:
    """Whether one of ``scopes`` matches the handler ``qn``."""
    return any(fnmatchcase(qn, pattern) for pattern in scopes)


def parse_scopes(text: str | Iterable[str]) -> frozenset[str]:
    """Scopes from ``'crm:write:*,crm:query:*'`` (or a list); raises ``ValueError`` naming
    a pattern that is not a QN pattern, or for none at all."""
    parts = text.split(",") if isinstance(text, str) else list(text)
    found = frozenset(part.strip() for part in parts if part.strip())
    if not found:
        raise ValueError("give at least one scope, such as 'crm:write:*'")
    for pattern in found:
        if not SCOPE_PATTERN.fullmatch(pattern):
            raise ValueError(
                f"scope {pattern!r} is not a qualified-name pattern: write "
                "'<feature>:<write|query>:<name>' with * for any part, such as 'crm:write:*'"
            )
    return found


def admits_caller(user: SessionUser, qn: str, access: Access) -> bool:
    """Whether ``user`` may call the handler ``qn`` whose rule is ``access``: a scoped
    token's scopes reach it, and its roles (or, for a token made without roles, its scopes)
    admit it. The service's admission refuses the same calls with their reasons."""
    if user.scopes is not None and not scopes_admit(user.scopes, qn):
        return False
    return grants_call(user, qn, access)


def grants_call(user: SessionUser, qn: str, access: Access) -> bool:
    """Whether ``user``'s roles admit the handler ``qn`` (for a token made without roles:
    its scopes), leaving a scoped token's limit aside (``admits_caller`` adds it)."""
    return access.admits(user) or scopes_grant(user, qn, access)


def scopes_grant(user: SessionUser, qn: str, access: Access) -> bool:
    """Whether a token whose scopes are its grant (made by an operator without roles)
    reaches the handler ``qn``: its scopes match, and a caller's role could reach it (never
    a handler only the ``system`` user may call)."""
    return (
        user.scopes_grant
        and user.scopes is not None
        and scopes_admit(user.scopes, qn)
        and bool(access.roles - {SYSTEM_ROLE})
    )
