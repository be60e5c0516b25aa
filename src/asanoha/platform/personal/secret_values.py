"""The values of features' secrets read or set in the current context, and whether a value
about to leave the platform carries one (see ``service/secret_guard``).

They live here, beside the personal-data redaction, so that the store can ask too: an event
whose payload would carry a secret in plain text is refused before it is appended.

A context variable holds them: a thread (or asyncio task) that read a secret keeps knowing
it for the rest of its life, which costs a lookup per check and never shows a secret. A job
attempt runs in a fresh context, so its secrets end with it.
"""

from __future__ import annotations

import json
from contextvars import ContextVar
from typing import Any

#: Values shorter than this are not searched for inside texts (they would match words).
MIN_MATCHED = 4

_NOTED: ContextVar[frozenset[str]] = ContextVar("asanoha_secret_values", default=frozenset())


def note(value: str) -> bool:
    """Record ``value``; whether it is long enough to be recognised."""
    if not isinstance(value, str) or len(value) < MIN_MATCHED:
        return False
    forms = {value, json.dumps(value)[1:-1], repr(value)[1:-1]}
    noted = _NOTED.get()
    if not forms <= noted:
        _NOTED.set(noted | forms)
    return True


def noted() -> frozenset[str]:
    """The secret values recorded in this context (with their JSON and ``repr`` forms)."""
    return _NOTED.get()


def carries_secret(value: Any) -> bool:
    """Whether ``value`` (any JSON-like value, or a text) holds a recorded secret."""
    secrets = _NOTED.get()
    if not secrets:
        return False
    if isinstance(value, str):
        text = value
    else:
        try:
            text = json.dumps(value, default=str, ensure_ascii=False)
        except (TypeError, ValueError):
            text = repr(value)
    return any(secret in text for secret in secrets)
