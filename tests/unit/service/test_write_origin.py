"""``WriteOrigin``: the chain's principal and risk travel in job headers and event metadata."""

from __future__ import annotations

from asanoha import Access
from asanoha.platform.model import SessionUser
from asanoha.platform.service import WriteOrigin
from asanoha.platform.service.request import principal_kind

ADMIN = Access(roles=["Admin"])


def test_a_call_records_the_principal_its_kind_run_and_the_entry_risk() -> None:
    agent = SessionUser.of("assistant", "acme", ["Admin"]).as_agent("run-3")
    origin = WriteOrigin.of_call("shop:write:quick", agent, ADMIN, "mid")
    assert (origin.principal, origin.principal_kind, origin.agent_run) == (
        "assistant",
        "agent",
        "run-3",
    )
    assert origin.entry_risk == "mid"
    assert origin.agent_below_high
    assert WriteOrigin.from_header(origin.to_header()) == origin


def test_only_an_agent_below_high_limits_the_chain() -> None:
    person = SessionUser.of("u-1", "acme", ["Admin"])
    agent = person.as_agent("run")
    assert not WriteOrigin.of_call("q", person, ADMIN, "mid").agent_below_high
    assert not WriteOrigin.of_call("q", agent, ADMIN, "high").agent_below_high
    assert WriteOrigin.of_call("q", agent, ADMIN, "low").agent_below_high


def test_principal_kinds() -> None:
    assert principal_kind(SessionUser.of("u-1", "acme")) == "human"
    assert principal_kind(SessionUser.of("u-1", "acme").as_agent("r")) == "agent"
    assert principal_kind(SessionUser.system("acme")) == "system"
    assert principal_kind(SessionUser.anonymous("acme")) == "system"


def test_a_header_written_before_the_principal_was_carried_reads_as_a_system_chain() -> None:
    old = {"root_qn": "shop:write:order", "anonymous_root": True, "public_intake": True}
    origin = WriteOrigin.from_header(old)
    assert (origin.root_qn, origin.anonymous_root, origin.public_intake) == (
        "shop:write:order",
        True,
        True,
    )
    assert (origin.principal, origin.principal_kind, origin.entry_risk) == (None, "system", None)
    assert not origin.agent_below_high


def test_a_malformed_header_reads_as_no_chain() -> None:
    assert WriteOrigin.from_header(None) == WriteOrigin()
    odd = WriteOrigin.from_header({"principal_kind": "robot", "entry_risk": "extreme"})
    assert (odd.principal_kind, odd.entry_risk) == ("system", None)
