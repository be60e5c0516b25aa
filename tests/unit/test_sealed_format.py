"""The sealed form of a personal value: stored values stay readable across versions, and the
header (tenant, subject, scope, field) is bound to the ciphertext."""

from __future__ import annotations

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from asanoha.platform.personal import cipher

KEY = AESGCM(bytes(range(32)))
SUBJECT = "7d0c0e3e-3f7a-4b51-9c3e-2a0f6c1d9b11"
#: Sealed under KEY by an earlier release: what is in stored events must keep opening.
STORED = (
    "pii1.WyJhY21lIiwiN2QwYzBlM2UtM2Y3YS00YjUxLTljM2UtMmEwZjZjMWQ5YjExIiwiY3JtOmNvbnRhY3QiLCJl"
    "bWFpbCJd.9LdgjADwOxUiGQJeQYEOaccmnu7zQvG4ZXn8-oHSHqZnmbPBdrhK9UprWls"
)


def test_a_value_sealed_by_an_earlier_release_opens() -> None:
    parsed = cipher.parse(STORED)
    assert parsed is not None
    assert (parsed.tenant_id, parsed.subject, parsed.scope, parsed.field) == (
        "acme",
        SUBJECT,
        "crm:contact",
        "email",
    )
    assert cipher.open_sealed(KEY, parsed) == (True, {"a": "ä", "n": 1})


def test_seal_then_open_round_trips_any_json() -> None:
    for value in ["alice@example.org", "ü" * 40, 12, 1.5, True, ["a", {"b": None}]]:
        parsed = cipher.parse(cipher.seal(KEY, "t/1", "s.2", "crm:contact", "email", value))
        assert parsed is not None
        assert parsed.key_ref == ("t/1", "s.2")
        assert cipher.open_sealed(KEY, parsed) == (True, value)


def test_a_value_moved_to_another_field_or_key_does_not_open() -> None:
    sealed = cipher.seal(KEY, "acme", SUBJECT, "crm:contact", "email", "alice@example.org")
    parsed = cipher.parse(sealed)
    assert parsed is not None
    other_header = cipher.parse(cipher.seal(KEY, "acme", SUBJECT, "crm:contact", "name", "x"))
    assert other_header is not None
    moved = cipher.Sealed("acme", SUBJECT, "crm:contact", "name", other_header.header, parsed.blob)
    assert cipher.open_sealed(KEY, moved) == (False, None)
    assert cipher.open_sealed(AESGCM(bytes(32)), parsed) == (False, None)


def test_texts_that_only_look_sealed_are_not_parsed() -> None:
    for text in ["pii1.", "pii1.abc", "pii1.!!!.xyz", "pii1.WyJhIl0.AAAA", "hello", "pii1ö.a.b"]:
        assert cipher.parse(text) is None, text
