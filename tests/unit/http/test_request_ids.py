"""Request id sanitising, without a server."""

from __future__ import annotations

from asanoha.platform.http.request_ids import MAX_ID_LENGTH, mint_id, sanitize_id


def test_safe_ids_pass_unchanged() -> None:
    assert sanitize_id("abc-123_x.y:z") == "abc-123_x.y:z"


def test_unsafe_characters_are_removed() -> None:
    assert sanitize_id("a b\r\n<c>\"d'") == "abcd"


def test_nothing_left_means_no_id() -> None:
    assert sanitize_id(None) is None
    assert sanitize_id("") is None
    assert sanitize_id("<>") is None


def test_long_ids_are_cut() -> None:
    assert sanitize_id("x" * 1000) == "x" * MAX_ID_LENGTH


def test_minted_ids_are_unique_and_safe() -> None:
    ids = {mint_id() for _ in range(100)}
    assert len(ids) == 100
    assert all(sanitize_id(value) == value for value in ids)
