"""URL-safe base64 without padding, as sealed values, cursors and approval tokens write it."""

from __future__ import annotations

import base64

import pytest

from asanoha.platform import base64url


def test_encode_is_urlsafe_base64_without_padding_and_decodes_back() -> None:
    for size in range(70):
        data = bytes((size * 37 + n) % 256 for n in range(size))
        text = base64url.encode(data)
        assert text == base64.urlsafe_b64encode(data).decode().rstrip("=")
        assert base64url.decode(text) == data


@pytest.mark.parametrize("text", ["a", "abcde", "é"])
def test_text_that_is_not_base64_raises_value_error(text: str) -> None:
    with pytest.raises(ValueError):
        base64url.decode(text)
