"""``FORGOTTEN``: what a personal value of a forgotten subject reads as."""

from __future__ import annotations

from typing import Any

#: The wire form of a forgotten value.
FORGOTTEN_TEXT = "[forgotten]"


class _Forgotten(str):
    """A ``str`` so that it is JSON as it is (``"[forgotten]"``); compare with ``is``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "FORGOTTEN"

    def __reduce__(self) -> Any:
        return (_forgotten, ())


def _forgotten() -> _Forgotten:
    return FORGOTTEN


FORGOTTEN: _Forgotten = _Forgotten(FORGOTTEN_TEXT)
