"""The feed checks tokens with the verifier every route uses: a revoked token opens no
stream, a personal access token opens one, and a scoped token receives only the events of
the entities whose read query its scopes reach and opens only the stream handlers they
name."""

from __future__ import annotations

import datetime as dt

import httpx

from asanoha.testing import Stack, TestUsers
from tests.integration.feed.conftest import Served
from tests.integration.feed.sse_client import open_stream

ADMIN = TestUsers.admin


def personal_token(stack: Stack, scopes: str) -> str:
    """A personal access token of an Admin of tenant A, limited to ``scopes``."""
    return stack.app.tokens.access_tokens.create(
        tenant_id=ADMIN.tenant_id, user_id=ADMIN.id, name="feed", scopes=scopes,
        lifetime=dt.timedelta(days=1), created_by="test", roles=["Admin"],
    ).token  # fmt: skip


def refusal(served: Served, token: str, path: str = "/api/stream") -> tuple[int, str]:
    answer = httpx.get(f"{served.base_url}{path}", params={"access_token": token}, timeout=30)
    return answer.status_code, answer.json()["error"]["reason"]


def test_a_scoped_token_receives_the_events_its_scopes_reach(stack: Stack, served: Served):
    token = personal_token(stack, "crm:query:ticket:*,crm:stream:board")
    with open_stream(served.base_url, token, {"types": "crm:event:*"}) as stream:
        stream.read_until(lambda s: b"retry:" in s.raw)
        stack.http.write_ok("crm:write:note:create", {"text": "note-outside-scopes"}, ADMIN)
        stack.http.write_ok("crm:write:audit:create", {"what": "audit-outside-scopes"}, ADMIN)
        ticket = stack.http.write_ok("crm:write:ticket:create", {"title": "In scope"}, ADMIN)
        stream.read_until(lambda s: any(m.json["streamId"] == ticket["id"] for m in s.events))
    assert [m.json["type"] for m in stream.events] == ["crm:event:ticket.created"]
    assert b"note-outside-scopes" not in stream.raw and b"audit-outside-scopes" not in stream.raw
    # The stream handler its scopes name opens; another one is refused by name.
    with open_stream(served.base_url, token, path="/api/stream/crm:stream:board") as board:
        board.read_until(lambda s: b"retry:" in s.raw)
    assert refusal(served, token, "/api/stream/crm:stream:audit-trail") == (
        403,
        "token_scope_denied",
    )


def test_a_revoked_token_opens_no_stream(stack: Stack, served: Served) -> None:
    token = personal_token(stack, "crm:*")
    token_id = stack.app.tokens.verify(token).token_id
    assert token_id is not None
    with open_stream(served.base_url, token) as stream:
        stream.read_until(lambda s: b"retry:" in s.raw)
    stack.app.tokens.access_tokens.revoke(ADMIN.tenant_id, token_id, revoked_by="test")
    assert refusal(served, token) == (401, "token_revoked")
    # A signed token revoked through the API likewise.
    signed = served.token(ADMIN)
    revoked = httpx.post(
        f"{served.base_url}/api/auth/revoke",
        headers={"Authorization": f"Bearer {signed}"},
        timeout=30,
    )
    assert revoked.status_code == 200, revoked.text
    assert refusal(served, signed) == (401, "token_revoked")


def test_an_open_stream_ends_with_reauth_once_its_token_is_revoked(
    stack: Stack, served: Served
) -> None:
    token = personal_token(stack, "crm:*")
    token_id = stack.app.tokens.verify(token).token_id
    assert token_id is not None
    with open_stream(served.base_url, token, {"types": "crm:event:*"}) as stream:
        stream.read_until(lambda s: b"retry:" in s.raw)
        first = stack.http.write_ok("crm:write:ticket:create", {"title": "Before"}, ADMIN)
        stream.read_until(lambda s: any(m.json["streamId"] == first["id"] for m in s.events))
        stack.app.tokens.access_tokens.revoke(ADMIN.tenant_id, token_id, revoked_by="test")
        stream.read_to_end()
    [reauth] = [message for message in stream.messages if message.event == "reauth"]
    assert reauth.json["reason"] == "token_revoked"
    assert reauth.json["lastEventId"] == stream.ids[-1]
