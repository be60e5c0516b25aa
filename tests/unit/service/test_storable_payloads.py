"""check_storable names the path of unstorable text whether the payload is flat (checked in
one loop) or nested (walked)."""

from __future__ import annotations

from typing import Any

import pytest

from asanoha.platform.errors import ValidationError
from asanoha.platform.service.validation import check_storable


def refused_path(payload: Any) -> str:
    with pytest.raises(ValidationError) as caught:
        check_storable(payload, "shop:write:item:create")
    (problem,) = caught.value.details["fields"]
    assert problem["type"] == "unstorable_text"
    return str(problem["path"])


@pytest.mark.parametrize(
    "payload",
    [
        {},
        {"title": "note", "amount": 3, "price": 1.5, "done": False, "gone": None},
        {"title": "ü ∑ 😀"},
        {"lines": [{"name": "a"}, {"name": "b"}], "meta": {"key": "value"}},
        ["a", 1, None],
        "plain text",
    ],
)
def test_storable_payloads_pass(payload: Any) -> None:
    check_storable(payload, "shop:write:item:create")


def test_a_nul_in_a_flat_value_names_its_field() -> None:
    assert refused_path({"amount": 1, "title": "a\x00b"}) == "title"


def test_a_lone_surrogate_in_a_flat_value_names_its_field() -> None:
    assert refused_path({"title": "ok", "note": "x\ud800"}) == "note"


def test_a_nul_in_a_flat_key_names_it_escaped() -> None:
    assert refused_path({"ti\x00tle": "a"}) == "ti\\u0000tle"


def test_a_nul_under_a_nested_value_names_the_whole_path() -> None:
    payload = {"title": "fine", "lines": [{"name": "a"}, {"name": "b\x00"}]}
    assert refused_path(payload) == "lines.1.name"


def test_a_flat_payload_with_keys_that_are_not_text_is_walked() -> None:
    assert refused_path({1: "a\x00"}) == "1"
