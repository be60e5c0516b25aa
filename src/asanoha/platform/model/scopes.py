"""Token scopes: qualified-name patterns (``crm:write:*``, ``crm:query:contact:list``) that
limit which handlers a scoped token may call, on top of what its roles admit."""

from __future__ import annotations

import re
from collections.abc import Iterable
from fnmatch import fnmatchcase

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
