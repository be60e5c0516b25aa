"""Token scopes are QN patterns: ``*`` matches any run of characters, colons included."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from asanoha.platform.model.scopes import parse_scopes, scopes_admit


class Nothing(BaseModel):
    """Takes nothing."""


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


def test_scopes_that_grant_never_reach_a_system_only_handler() -> None:
    from asanoha import Access, Feature, Registry, SessionUser
    from asanoha.platform.service.admission import scopes_grant

    feature = Feature("ops")

    @feature.write_handler("tick", access=Access(roles=["system"]))
    def tick(payload: Nothing, ctx: object) -> None:
        return None

    @feature.write_handler("note", access=Access(roles=["Admin"]))
    def note(payload: Nothing, ctx: object) -> None:
        return None

    registry = Registry([feature])
    user = SessionUser.of("u-1", "t").with_scopes(frozenset({"ops:*"}), grant=True)
    assert scopes_grant(user, registry.handler("ops:write:note"))
    assert not scopes_grant(user, registry.handler("ops:write:tick"))
    ungranted = SessionUser.of("u-1", "t").with_scopes(frozenset({"ops:*"}))
    assert not scopes_grant(ungranted, registry.handler("ops:write:note"))
