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
    from asanoha.platform.model.scopes import scopes_grant

    feature = Feature("ops")

    @feature.write_handler("tick", access=Access(roles=["system"]))
    def tick(payload: Nothing, ctx: object) -> None:
        return None

    @feature.write_handler("note", access=Access(roles=["Admin"]))
    def note(payload: Nothing, ctx: object) -> None:
        return None

    registry = Registry([feature])
    user = SessionUser.of("u-1", "t").with_scopes(frozenset({"ops:*"}), grant=True)
    assert scopes_grant(user, "ops:write:note", registry.handler("ops:write:note").access)
    assert not scopes_grant(user, "ops:write:tick", registry.handler("ops:write:tick").access)
    ungranted = SessionUser.of("u-1", "t").with_scopes(frozenset({"ops:*"}))
    assert not scopes_grant(ungranted, "ops:write:note", registry.handler("ops:write:note").access)


def test_a_scoped_token_is_admitted_only_within_its_scopes_whatever_its_roles() -> None:
    from asanoha import Access
    from asanoha.platform.model import SessionUser
    from asanoha.platform.model.scopes import admits_caller, grants_call

    admins = Access(roles=["Admin"])
    user = SessionUser.of("u-1", "t", ["Admin"]).with_scopes(frozenset({"crm:query:*"}))
    assert admits_caller(user, "crm:query:contact:list", admins)
    # Its role reaches the write, its scopes do not: listed nowhere, refused by name.
    assert grants_call(user, "crm:write:contact:create", admins)
    assert not admits_caller(user, "crm:write:contact:create", admins)
    roleless = SessionUser.of("u-2", "t").with_scopes(frozenset({"crm:query:*"}), grant=True)
    assert admits_caller(roleless, "crm:query:contact:list", admins)
    assert not admits_caller(roleless, "crm:query:contact:list", Access(roles=["system"]))
