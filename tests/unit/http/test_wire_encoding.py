"""An answer is always valid UTF-8, even when it echoes a lone surrogate."""

from __future__ import annotations

import json

from asanoha.platform.http.wire import WireResponse


def test_a_lone_surrogate_is_sent_as_the_replacement_character() -> None:
    response = WireResponse({"error": {"details": {"path": "filter.\ud800"}}})
    assert json.loads(response.body.decode("utf-8")) == {
        "error": {"details": {"path": "filter.\ufffd"}}
    }


def test_other_text_is_sent_unchanged() -> None:
    response = WireResponse({"data": "näme \U0001f600"})
    assert json.loads(response.body.decode("utf-8")) == {"data": "näme \U0001f600"}
