"""Facts a frozen definition fixes, worked out on first use and kept with it.

Every write asks which of an entity's fields are flagged, bounded, files or blind-indexed;
the answer cannot change once the entity is defined, and working it out again on every call
is most of what such a question costs. The answer is kept in the definition's own
``__dict__`` (the dataclass is frozen, so not through an attribute), under a name that
cannot clash with a declared one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

_T = TypeVar("_T")


def kept(definition: Any, name: str, build: Callable[[], _T]) -> _T:
    """``build()``, called on the first ask of ``name`` about ``definition`` and kept with
    it for the next ones. What is kept is shared: callers must not change it."""
    key = f"_asanoha_kept_{name}"
    found: _T | None = definition.__dict__.get(key)
    if found is None:
        found = build()
        definition.__dict__[key] = found
    return found
