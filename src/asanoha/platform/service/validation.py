"""Turn pydantic validation failures into ``ValidationError`` with one entry per field path."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, TypeVar

import pydantic

from asanoha.platform.errors import ValidationError

M = TypeVar("M", bound=pydantic.BaseModel)

# What no JSON column (Postgres jsonb, text) and no UTF-8 answer can hold: U+0000 and the
# UTF-16 halves that JSON escapes can smuggle in alone (\ud800).
UNSTORABLE_TEXT = re.compile("[\x00\ud800-\udfff]")
#: Nesting beyond this is not walked (the HTTP layer bounds JSON depth far below it).
_MAX_WALK_DEPTH = 200


def field_errors(exc: pydantic.ValidationError) -> list[dict[str, Any]]:
    """``[{"path", "type", "message"}]`` for every problem pydantic found."""
    return [
        {
            "path": ".".join(str(part) for part in error["loc"]) or "$",
            "type": error["type"],
            "message": error["msg"],
        }
        for error in exc.errors(include_url=False, include_input=False)
    ]


def validate_payload(model: type[M], payload: Any, handler: str) -> M:
    """``payload`` (a dict or a model instance) validated as ``model``."""
    if isinstance(payload, model):
        return payload
    if isinstance(payload, pydantic.BaseModel):
        payload = payload.model_dump(exclude_unset=True)
    try:
        return model.model_validate(payload)
    except pydantic.ValidationError as exc:
        raise ValidationError(handler=handler, fields=field_errors(exc)) from None


def invalid_field(handler: str, path: str, type: str, message: str) -> ValidationError:
    """A ``ValidationError`` about one field, for checks pydantic does not make."""
    return ValidationError(
        handler=handler, fields=[{"path": path, "type": type, "message": message}]
    )


def check_storable(payload: Any, handler: str) -> None:
    """Refuse a payload that holds text no database column or JSON answer can carry.

    NUL (U+0000) and lone surrogates, in a value or a key, at any depth: each would fail
    later, inside the transaction (the outbox row of a triggered job, a filter parameter) or
    while writing the error that echoes it. Raises ``ValidationError`` naming the path.
    """
    if isinstance(payload, pydantic.BaseModel):
        payload = payload.model_dump()
    if type(payload) is dict and _flat_and_storable(payload):
        return
    for path in _unstorable_paths(payload, (), 0):
        raise invalid_field(
            handler,
            ".".join(path) or "$",
            "unstorable_text",
            "text may not contain U+0000 or an unpaired surrogate (U+D800 to U+DFFF)",
        )


#: Values with no text inside: nothing in them to refuse.
_TEXTLESS = frozenset({int, float, bool, type(None)})


def _flat_and_storable(payload: dict[Any, Any]) -> bool:
    """Whether ``payload`` holds only storable text and text-less values at its top level
    (most payloads): then the walk that names a path has nothing to find. Anything else
    (a nested value, a key that is no ``str``) is left to the walk."""
    for key, value in payload.items():
        if type(key) is not str or UNSTORABLE_TEXT.search(key):
            return False
        kind = type(value)
        if kind is str:
            if UNSTORABLE_TEXT.search(value):
                return False
        elif kind not in _TEXTLESS:
            return False
    return True


def _unstorable_paths(value: Any, path: tuple[str, ...], depth: int) -> Iterator[tuple[str, ...]]:
    if isinstance(value, str):
        if UNSTORABLE_TEXT.search(value):
            yield path
    elif depth > _MAX_WALK_DEPTH:
        return
    elif isinstance(value, dict):
        for key, item in value.items():
            name = str(key)
            if UNSTORABLE_TEXT.search(name):
                yield (*path, printable(name))
            yield from _unstorable_paths(item, (*path, printable(name)), depth + 1)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _unstorable_paths(item, (*path, str(index)), depth + 1)


def printable(text: str) -> str:
    """``text`` with NUL and lone surrogates written as ``\\uXXXX`` escapes, safe to echo."""
    return UNSTORABLE_TEXT.sub(lambda match: f"\\u{ord(match.group()):04x}", text)
