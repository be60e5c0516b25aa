"""Stream handlers: ``/api/stream/<qn>`` sends what the handler makes of each event the
caller may see; the handler's access decides who may open it."""

from __future__ import annotations

import re
import types
from pathlib import Path
from typing import Any

import httpx

from asanoha import SessionUser
from asanoha.testing import Stack, TestUsers
from tests.integration.feed.conftest import Served, serve
from tests.integration.feed.sse_client import open_stream

ADMIN, USER = TestUsers.admin, TestUsers.user


def test_a_stream_handler_shapes_what_the_caller_may_see(stack: Stack, served: Served) -> None:
    path = "/api/stream/crm:stream:board"
    with (
        open_stream(served.base_url, served.token(USER), path=path) as user,
        open_stream(served.base_url, served.token(ADMIN), path=path) as admin,
    ):
        for stream in (user, admin):
            stream.read_until(lambda s: b"retry:" in s.raw)
        stack.http.write_ok("crm:write:audit:create", {"what": "not on the board"}, ADMIN)
        ticket = stack.http.write_ok(
            "crm:write:ticket:create", {"title": "Printer jams", "cost": 4242}, ADMIN
        )
        stack.http.write_ok(
            "crm:write:ticket:update",
            {"id": ticket["id"], "version": ticket["version"], "changes": {"cost": 5}},
            ADMIN,
        )
        renamed = stack.http.write_ok(
            "crm:write:ticket:update",
            {"id": ticket["id"], "version": ticket["version"] + 1, "changes": {"title": "Fixed"}},
            ADMIN,
        )
        for stream in (user, admin):
            stream.read_until(lambda s: len(s.events) == 2)
    assert [m.json for m in user.events] == [
        {"ticket": ticket["id"], "title": "Printer jams", "cost": None},
        {"ticket": ticket["id"], "title": "Fixed", "cost": None},
    ]
    assert b'"cost":4242' not in bytes(user.raw)
    assert [m.json["cost"] for m in admin.events] == [4242, None]
    # The message ids are the events' positions: a client resumes as on /api/stream.
    assert user.ids == admin.ids and user.ids[-1] == max(user.ids)
    assert renamed["version"] == 3


def test_a_stream_handler_refuses_callers_its_access_does_not_admit(
    stack: Stack, served: Served
) -> None:
    refused = httpx.get(
        f"{served.base_url}/api/stream/crm:stream:audit-trail",
        params={"access_token": served.token(USER)},
    )
    assert refused.status_code == 403
    error = refused.json()["error"]
    assert (error["code"], error["reason"]) == ("access_denied", "role_required")
    missing = httpx.get(
        f"{served.base_url}/api/stream/crm:stream:nothing",
        params={"access_token": served.token(ADMIN)},
    )
    assert missing.status_code == 404
    assert missing.json()["error"]["reason"] == "handler_not_found"
    assert served.feed.subscriptions == frozenset()


def guide_board() -> Any:
    """The live updates guide's stream handler example, run as a module."""
    guide = Path(__file__).resolve().parents[3] / "docs" / "guides" / "live-updates.md"
    text = guide.read_text(encoding="utf-8")
    block = next(
        b
        for b in re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)
        if b.startswith("# board.py")
    )
    module = types.ModuleType("board")
    exec(compile(block, "board.py", "exec"), module.__dict__)
    return module


def test_the_guide_stream_handler_serves_its_feed(asanoha_stack: Any) -> None:
    board = guide_board()
    stack: Stack = asanoha_stack(features=[board.board])
    staff = SessionUser.of("staff-a", "tenant-a", ["Staff"])
    for served in serve(stack):
        with open_stream(
            served.base_url, served.token(staff), path="/api/stream/board:stream:titles"
        ) as feed:
            feed.read_until(lambda s: b"retry:" in s.raw)
            row = stack.http.write_ok("board:write:ticket:create", {"title": "On the board"}, staff)
            feed.read_until(lambda s: len(s.events) == 1)
        assert feed.events[0].json == {"ticket": row["id"], "title": "On the board"}
