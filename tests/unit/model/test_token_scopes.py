"""Token scopes are QN patterns: ``*`` matches any run of characters, colons included."""

from __future__ import annotations

import pytest

from asanoha.platform.model.scopes import parse_scopes, scopes_admit


def test_a_pattern_matches_the_handlers_it_names() -> None:
    scopes = parse_scopes("crm:write:*, crm:query:contact:list")
    assert scopes == frozenset({"crm:write:*", "crm:query:contact:list"})
    assert scopes_admit(scopes, "crm:write:contact:create")
    assert scopes_admit(scopes, "crm:query:contact:list")
    assert not scopes_admit(scopes, "crm:query:contact:detail")
    assert not scopes_admit(scopes, "crmx:write:contact:create")
    assert not scopes_admit(scopes, "billing:write:invoice:create")


@pytest.mark.parametrize("text", ["", " , ", "CRM:write:*", "crm write", "crm:write:[a]"])
def test_anything_but_qn_patterns_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match=r"scope|at least one"):
        parse_scopes(text)
