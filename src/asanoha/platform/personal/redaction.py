"""Personal values kept out of the texts a job or a consumer leaves in the database: its log
lines and its error texts.

A job attempt and a consumer pass open a scope (``revealing``) around their handler. While it
is open, every personal value a vault seals or opens is recorded in it (``note``), and
``redact`` replaces each recorded value in a text by ``MARKER`` before the text is stored.
A marker, not a sealed value: a log line or an error text is read by an operator, never read
back by the application; a sealed text (a hundred characters and more) would make it
unreadable and outgrow its bounds, and a marker needs no key, so it says nothing more once the
subject is forgotten.

A text of ``MIN_MATCHED`` characters and more is replaced wherever it occurs (also as JSON or
``repr`` writes it); a shorter value (an initial, a two-digit number) only when it is the
whole message, since it would otherwise match inside unrelated words. Without an open scope,
or while nothing personal was revealed, nothing is recorded and texts stay as they are.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from asanoha.platform.personal.sentinel import FORGOTTEN

#: What a personal value in a stored log line or error text reads as.
MARKER = "[personal]"
#: Texts this long are replaced wherever they occur; shorter ones only as a whole message.
MIN_MATCHED = 4
#: Up to this many recorded texts a text is searched for each one; with more, through an
#: index of their first ``MIN_MATCHED`` characters (one look-up per character of the text).
_SCAN_EACH = 64

_SCOPE: ContextVar[Revealed | None] = ContextVar("asanoha_personal_revealed", default=None)


class Revealed:
    """The personal values revealed while one scope is open (see the module)."""

    def __init__(self, parent: Revealed | None = None) -> None:
        self._parent = parent
        self._lock = threading.Lock()
        self._texts: set[str] = set()
        self._whole: set[str] = set()
        self._index: dict[str, list[str]] | None = None

    def __bool__(self) -> bool:
        return bool(self._texts or self._whole)

    def add(self, value: Any) -> None:
        """Record ``value`` (any JSON: its texts and numbers are recorded)."""
        texts: list[str] = []
        _texts_of(value, texts)
        if not texts:
            return
        with self._lock:
            for text in texts:
                if len(text) >= MIN_MATCHED:
                    self._texts.update(_written_forms(text))
                elif text.strip():
                    self._whole.add(text.strip())
            self._index = None
        if self._parent is not None:
            self._parent.add(value)

    def redact(self, text: str) -> str:
        """``text`` (one message) with every recorded value in it replaced by ``MARKER``."""
        if not text or not (self._texts or self._whole):
            return text
        with self._lock:
            if text.strip() in self._whole or text in self._texts:
                return MARKER
            if len(self._texts) <= _SCAN_EACH:
                found = [value for value in self._texts if value in text]
                if not found:
                    return text
                # One pass over the text, longest value first: a value that is part of a
                # longer one, or of the marker, is not replaced again.
                found.sort(key=len, reverse=True)
                pattern = re.compile("|".join(re.escape(value) for value in found))
                return pattern.sub(MARKER, text)
            return _replace_indexed(text, self._indexed())

    def _indexed(self) -> dict[str, list[str]]:
        if self._index is None:
            index: dict[str, list[str]] = {}
            for value in sorted(self._texts, key=len, reverse=True):
                index.setdefault(value[:MIN_MATCHED], []).append(value)
            self._index = index
        return self._index


def _replace_indexed(text: str, index: dict[str, list[str]]) -> str:
    parts: list[str] = []
    start = position = 0
    end = len(text) - MIN_MATCHED + 1
    while position < end:
        for value in index.get(text[position : position + MIN_MATCHED], ()):
            if text.startswith(value, position):
                parts.append(text[start:position])
                parts.append(MARKER)
                position = start = position + len(value)
                break
        else:
            position += 1
    if not parts:
        return text
    parts.append(text[start:])
    return "".join(parts)


def _texts_of(value: Any, texts: list[str]) -> None:
    if value is None or value is FORGOTTEN or isinstance(value, bool):
        return
    if isinstance(value, str):
        texts.append(value)
    elif isinstance(value, int | float):
        texts.append(str(value))
    elif isinstance(value, dict):
        for inner in value.values():
            _texts_of(inner, texts)
    elif isinstance(value, list | tuple):
        for inner in value:
            _texts_of(inner, texts)


def _written_forms(text: str) -> set[str]:
    """``text`` as it is, and as a JSON document and ``repr`` write it inside quotes."""
    forms = {text, json.dumps(text)[1:-1], json.dumps(text, ensure_ascii=False)[1:-1]}
    forms.add(repr(text)[1:-1])
    return {form for form in forms if len(form) >= MIN_MATCHED}


@contextmanager
def revealing() -> Iterator[Revealed]:
    """Open a scope that records the personal values revealed in it (a job attempt, a
    consumer pass); an enclosing scope records them too."""
    revealed = Revealed(_SCOPE.get())
    token = _SCOPE.set(revealed)
    try:
        yield revealed
    finally:
        _SCOPE.reset(token)


def current() -> Revealed | None:
    """The open scope of this context (``None``: none)."""
    return _SCOPE.get()


def enter(revealed: Revealed | None) -> None:
    """Make ``revealed`` (the scope of another context) this context's scope: a job's handler
    runs in a context of its own."""
    _SCOPE.set(revealed)


def note(value: Any) -> None:
    """Record ``value``, just sealed or opened, in the open scope (if any)."""
    revealed = _SCOPE.get()
    if revealed is not None:
        revealed.add(value)


def redact(text: str) -> str:
    """``text`` (one message) with the personal values revealed in the open scope replaced
    by ``MARKER``; as it is without a scope."""
    revealed = _SCOPE.get()
    if revealed is None:
        return text
    return revealed.redact(text)


def redact_json(value: Any) -> Any:
    """``value`` (JSON) with each of its texts redacted (see ``redact``)."""
    revealed = _SCOPE.get()
    if not revealed:
        return value
    return _redact_all(revealed, value)


def _redact_all(revealed: Revealed, value: Any) -> Any:
    if isinstance(value, str):
        return revealed.redact(value)
    if isinstance(value, dict):
        return {key: _redact_all(revealed, inner) for key, inner in value.items()}
    if isinstance(value, list):
        return [_redact_all(revealed, inner) for inner in value]
    return value


def error_text(exc: BaseException) -> str:
    """``"Type: message"`` of ``exc``, its message redacted (see ``redact``)."""
    return f"{type(exc).__name__}: {redact(str(exc))}"
