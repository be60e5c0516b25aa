"""Body parsing limits, without a server."""

from __future__ import annotations

import json

import pytest

from asanoha.platform.errors import ValidationError
from asanoha.platform.http.limits import exceeds_depth, parse_json


def reason_of(raw: bytes, max_depth: int = 32) -> str:
    with pytest.raises(ValidationError) as raised:
        parse_json(raw, max_depth)
    return str(raised.value.reason)


@pytest.mark.parametrize(
    ("text", "depth"),
    [
        ("1", 0),
        ('"[[[["', 0),
        ("{}", 1),
        ('{"a": [1, {"b": []}]}', 4),
        ("[[], [[]], []]", 3),
        ('{"a": "]]]]", "b": [[["\\"["]]]}', 4),
    ],
)
def test_depth_is_counted_outside_strings(text: str, depth: int) -> None:
    assert not exceeds_depth(text, depth)
    if depth:
        assert exceeds_depth(text, depth - 1)


def test_empty_body_is_an_empty_object() -> None:
    assert parse_json(b"", 32) == {}
    assert parse_json(b"  \n", 32) == {}


def test_body_at_the_limit_parses() -> None:
    text = "[" * 32 + "]" * 32
    assert parse_json(text.encode(), 32) == json.loads(text)


def test_body_over_the_limit_is_json_too_deep() -> None:
    assert reason_of(b"[" * 33 + b"]" * 33) == "json_too_deep"
    assert reason_of(b"[" * 1_000_000) == "json_too_deep"


def test_unterminated_string_does_not_hide_depth() -> None:
    assert reason_of(b'"' + b"a" * 100_000, 2) == "malformed_json"


@pytest.mark.parametrize(
    "raw", [b"{", b"{'a': 1}", b'{"a": NaN}', b'{"a": Infinity}', b'{"a": 1e400}', b"\xff", b"[1,]"]
)
def test_malformed_bodies(raw: bytes) -> None:
    assert reason_of(raw) == "malformed_json"


def test_byte_order_mark_is_accepted() -> None:
    assert parse_json(b'\xef\xbb\xbf{"a": 1}', 32) == {"a": 1}
