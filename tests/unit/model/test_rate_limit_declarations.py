"""A handler that admits anonymous callers declares a rate limit, or rate_limit=None with a
reason; otherwise its definition fails, naming it."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from asanoha import Access, Entity, Feature, RateLimit, fields
from asanoha.platform.errors import DefinitionError

PUBLIC = Access(public="a sign-up form")


class Empty(BaseModel):
    pass


def handle(payload: Empty, ctx: Any) -> Any:
    return None


@pytest.mark.parametrize("kind", ["write", "query"])
def test_a_public_handler_without_a_rate_limit_is_refused_naming_it(kind: str) -> None:
    feature = Feature("signup")
    decorate = feature.write_handler if kind == "write" else feature.query_handler
    with pytest.raises(DefinitionError, match=rf"signup:{kind}:join admits anonymous callers"):
        decorate("join", access=PUBLIC)(handle)
    with pytest.raises(DefinitionError, match="rate_limit=None, reason="):
        decorate("join", access=PUBLIC, rate_limit=None)(handle)


def test_a_public_handler_with_a_limit_or_a_reason_is_defined() -> None:
    feature = Feature("signup")
    feature.write_handler("join", access=PUBLIC, rate_limit=RateLimit("5/minute", per="ip"))(handle)
    feature.query_handler("status", access=PUBLIC, rate_limit=None, reason="a static page")(handle)
    assert [h.rate_limit_reason for h in feature.handlers] == [None, "a static page"]


def test_a_blank_reason_or_a_reason_beside_a_limit_is_refused() -> None:
    feature = Feature("signup")
    with pytest.raises(DefinitionError, match="non-blank reason"):
        feature.write_handler("join", access=PUBLIC, rate_limit=None, reason="  ")(handle)
    with pytest.raises(DefinitionError, match="drop it beside a RateLimit"):
        feature.write_handler(
            "join", access=PUBLIC, rate_limit=RateLimit("5/minute"), reason="why"
        )(handle)


def test_a_handler_for_signed_in_callers_needs_no_declaration() -> None:
    feature = Feature("signup")
    feature.write_handler("join", access=Access(open_to_all="members"))(handle)
    assert feature.handlers[0].rate_limit is None


NOTE = Entity(table="notes", fields={"text": fields.text(personal=False, reason="fixture")})


def test_public_standard_handlers_declare_limits_per_verb_or_a_reason() -> None:
    feature = Feature("board")
    with pytest.raises(DefinitionError, match="board:query:note:list admits anonymous callers"):
        feature.crud("note", NOTE, write=Access(roles=["Admin"]), read=PUBLIC)
    limited = Feature("board")
    limited.crud(
        "note",
        NOTE,
        write=Access(roles=["Admin"]),
        read=PUBLIC,
        rate_limit={"list": RateLimit("30/minute", per="ip"), "detail": RateLimit("60/minute")},
    )
    limits = {h.qn: h.rate_limit for h in limited.handlers}
    assert limits["board:query:note:list"] == RateLimit("30/minute", per="ip")
    assert limits["board:write:note:create"] is None
    excused = Feature("board")
    excused.crud("note", NOTE, write=Access(roles=["Admin"]), read=PUBLIC, reason="a wall")
    assert {h.rate_limit_reason for h in excused.handlers} == {"a wall"}


def test_a_rate_limit_of_an_unknown_verb_is_refused() -> None:
    with pytest.raises(DefinitionError, match="unknown verb 'lst'"):
        Feature("board").crud(
            "note",
            NOTE,
            write=Access(roles=["Admin"]),
            read=Access(roles=["Admin"]),
            rate_limit={"lst": RateLimit("1/minute")},
        )
