"""What ``redact`` replaces in a text, for the values a scope recorded."""

from __future__ import annotations

import json

from asanoha.platform.personal import FORGOTTEN
from asanoha.platform.personal.redaction import (
    MARKER,
    error_text,
    note,
    redact,
    redact_json,
    revealing,
)


def test_without_a_scope_or_a_value_a_text_stays_as_it_is() -> None:
    note("carol.ann@example.org")  # no scope: recorded nowhere
    assert redact("mail to carol.ann@example.org") == "mail to carol.ann@example.org"
    with revealing() as revealed:
        note(None)
        note(FORGOTTEN)
        note(True)
        assert not revealed
        assert redact("mail to carol.ann@example.org") == "mail to carol.ann@example.org"


def test_a_long_value_anywhere_a_short_one_only_as_the_whole_message() -> None:
    with revealing():
        note({"email": "carol.ann@example.org", "initials": "CA", "age": 42, "tags": ["a"]})
        assert redact("mail to carol.ann@example.org bounced") == f"mail to {MARKER} bounced"
        assert redact("CA") == MARKER
        assert redact(" 42 ") == MARKER
        assert redact("CA said a word at 42") == "CA said a word at 42"
        assert error_text(ValueError("CA")) == f"ValueError: {MARKER}"


def test_a_value_is_found_as_json_and_repr_write_it() -> None:
    name = "Zoë O'Hara\nWest"
    with revealing():
        note(name)
        for written in (json.dumps({"n": name}), json.dumps({"n": name}, ensure_ascii=False)):
            assert name not in redact(written)
            assert redact(written) == f'{{"n": "{MARKER}"}}'
        assert redact(repr({"n": name})) == f"{{'n': \"{MARKER}\"}}"


def test_each_occurrence_is_replaced_once_longest_value_first() -> None:
    with revealing():
        note(["pers", "carol.ann", "carol.ann@example.org"])
        # The marker holds "pers": it is not replaced again.
        assert redact("pers carol.ann@example.org carol.ann") == f"{MARKER} {MARKER} {MARKER}"


def test_many_values_are_found_through_the_index() -> None:
    with revealing():
        note([f"person-{n:03d}@example.org" for n in range(500)])
        text = "to person-007@example.org, person-499@example.org and person-500@example.org"
        assert redact(text) == f"to {MARKER}, {MARKER} and person-500@example.org"
        assert redact("nobody here") == "nobody here"


def test_an_inner_scope_records_for_the_enclosing_one_too() -> None:
    with revealing():
        with revealing():
            note("carol.ann@example.org")
        assert redact("carol.ann@example.org") == MARKER
        details = {"fields": [{"message": "carol.ann@example.org is taken", "n": 1}]}
        assert redact_json(details) == {"fields": [{"message": f"{MARKER} is taken", "n": 1}]}
    assert redact("carol.ann@example.org") == "carol.ann@example.org"
