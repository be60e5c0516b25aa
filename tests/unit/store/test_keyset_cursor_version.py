"""A cursor of an earlier list order is refused rather than read in the new order (which
would skip or repeat rows around the nulls)."""

from __future__ import annotations

import json

import pytest

from asanoha.platform import base64url
from asanoha.platform.store import keyset


def cursor_of_version(version: int, query: str) -> str:
    body = json.dumps({"v": version, "q": query, "k": [None, "x"]}).encode()
    return f"{base64url.encode(body)}.{base64url.encode(keyset._seal(body))}"


def test_a_cursor_of_the_nulls_last_order_is_refused() -> None:
    with pytest.raises(keyset.CursorError, match="another version"):
        keyset.decode_cursor(cursor_of_version(1, "q"), "q", [])


def test_a_cursor_of_this_version_is_read() -> None:
    encoded = keyset.encode_cursor([], "q")
    assert keyset.decode_cursor(encoded, "q", []) == []
