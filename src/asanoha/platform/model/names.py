"""Qualified names (``scope:type:name``) and the snake_case to kebab-case conversion."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, get_args

from asanoha.platform.errors import DefinitionError

Kind = Literal["write", "query", "job", "event", "consumer", "projection", "stream", "workflow"]
KINDS: tuple[str, ...] = get_args(Kind)

_SEGMENT = r"[a-z][a-z0-9-]*"
_SEGMENT_RE = re.compile(rf"^{_SEGMENT}$")
# The name part may hold colons (``prompt:create``) and dotted event words (``prompt.created``).
_NAME_RE = re.compile(rf"^{_SEGMENT}(\.{_SEGMENT})*(:{_SEGMENT}(\.{_SEGMENT})*)*$")
_CAMEL_RE = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


@dataclass(frozen=True)
class QualifiedName:
    """A parsed ``scope:type:name``."""

    scope: str
    kind: Kind
    name: str

    def __str__(self) -> str:
        return f"{self.scope}:{self.kind}:{self.name}"


def to_kebab(identifier: str) -> str:
    """``send_welcome_mail`` or ``sendWelcomeMail`` -> ``send-welcome-mail``."""
    spaced = _CAMEL_RE.sub("-", identifier.strip())
    return spaced.replace("_", "-").lower()


def check_segment(value: str, what: str) -> str:
    """Return ``value`` if it is one lower-case kebab segment, else raise naming ``what``."""
    if not _SEGMENT_RE.match(value):
        raise DefinitionError(
            f"{what} {value!r} is not a lower-case kebab-case name (expected {_SEGMENT_RE.pattern})"
        )
    return value


def make_qn(scope: str, kind: Kind, name: str) -> str:
    """Build and validate ``scope:kind:name``; snake_case names are converted to kebab case."""
    check_segment(scope, "feature name")
    kebab = to_kebab(name)
    if not _NAME_RE.match(kebab):
        raise DefinitionError(
            f"{kind} name {name!r} of feature {scope!r} is not a valid name "
            "(lower-case kebab segments, separated by ':')"
        )
    return f"{scope}:{kind}:{kebab}"


def parse_qn(qn: str) -> QualifiedName:
    """Split a qualified name; raise ``ValueError`` when it is not one."""
    parts = qn.split(":", 2)
    if len(parts) != 3 or parts[1] not in KINDS:
        raise ValueError(f"{qn!r} is not a qualified name 'scope:type:name'")
    scope, kind, name = parts
    if not _SEGMENT_RE.match(scope) or not _NAME_RE.match(name):
        raise ValueError(f"{qn!r} is not a qualified name 'scope:type:name'")
    return QualifiedName(scope, kind, name)  # type: ignore[arg-type]
