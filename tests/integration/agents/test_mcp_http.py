"""The MCP server over streamable HTTP, mounted in the API app at ``/mcp``, with the SDK's client."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp_types.version import LATEST_HANDSHAKE_VERSION

from asanoha import Access, Entity, Feature, fields
from asanoha.platform.http import issue_token
from asanoha.platform.model import SessionUser
from asanoha.testing import Stack, TestUsers
from asanoha.testing.plugin import StackFactory
from asanoha.testing.serving import serve_in_thread
from tests.integration.agents.features import ASSISTANT, assist
from tests.integration.agents.scenario import run_scenario

jot = Entity(
    table="mcp_jots",
    fields={
        "text": fields.long_text(personal=False, reason="fixture"),
        "data": fields.json(),
    },
)
jots = Feature("jots")
jots.crud(
    "jot",
    jot,
    write=Access(roles=["Admin"]),
    read=Access(roles=["Admin"]),
    descriptions={"create": "Jot something down."},
)


@pytest.fixture
def stack(asanoha_stack: StackFactory) -> Stack:
    return asanoha_stack(features=[assist])


@contextlib.asynccontextmanager
async def mcp_session(url: str, stack: Stack, user: SessionUser) -> AsyncIterator[ClientSession]:
    """An initialised MCP client session at ``url`` as ``user``."""
    token = issue_token(stack.app.settings, user)
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def test_mcp_session_over_http_lists_calls_and_requires_approval(stack: Stack) -> None:
    async def scenario(base_url: str) -> None:
        async with mcp_session(f"{base_url}/mcp", stack, ASSISTANT) as session:
            await run_scenario(session, stack, same_process=True)

    with serve_in_thread(stack.app.build_http()) as base_url:
        anyio.run(scenario, base_url)


def test_tool_list_is_filtered_to_the_caller(stack: Stack) -> None:
    async def scenario(base_url: str) -> set[str]:
        async with mcp_session(f"{base_url}/mcp", stack, TestUsers.user) as session:
            return {tool.name for tool in (await session.list_tools()).tools}

    with serve_in_thread(stack.app.build_http()) as base_url:
        assert anyio.run(scenario, base_url) == {
            "assist:query:prompt:list",
            "assist:query:prompt:detail",
        }


def test_mcp_endpoint_refuses_a_request_without_a_token(stack: Stack) -> None:
    with serve_in_thread(stack.app.build_http()) as base_url:
        response = httpx2.post(
            f"{base_url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"}
        )
    assert response.status_code == 401
    assert response.json()["error"]["reason"] == "token_missing"


class RawMcp:
    """An MCP session spoken as plain JSON-RPC over HTTP, to send what the SDK's client
    would not (an over-sized or too deep call, another caller's session id)."""

    def __init__(self, url: str, stack: Stack) -> None:
        self.url = url
        self.stack = stack
        self.session_id: str | None = None

    def headers(self, user: SessionUser) -> dict[str, str]:
        found = {
            "Authorization": f"Bearer {issue_token(self.stack.app.settings, user)}",
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
        }
        if self.session_id is not None:
            found["mcp-session-id"] = self.session_id
            found["mcp-protocol-version"] = LATEST_HANDSHAKE_VERSION
        return found

    def post(self, user: SessionUser, body: bytes | dict[str, Any]) -> httpx2.Response:
        content = body if isinstance(body, bytes) else json.dumps(body).encode()
        return httpx2.post(self.url, content=content, headers=self.headers(user), timeout=30)

    def open(self, user: SessionUser) -> None:
        """initialize + initialized: a session of ``user``."""
        response = self.post(
            user,
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": LATEST_HANDSHAKE_VERSION,
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "1"},
                },
            },
        )
        assert response.status_code == 200, response.text
        self.session_id = response.headers["mcp-session-id"]
        done = self.post(user, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert done.status_code == 202, done.text

    def list_tools(self, user: SessionUser) -> httpx2.Response:
        return self.post(user, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})


def call_body(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


def nested(depth: int) -> Any:
    value: Any = "deep"
    for _ in range(depth):
        value = [value]
    return value


def jot_count(stack: Stack) -> int:
    return stack.row_counts()["jots:jot"]


def test_an_over_sized_tool_call_is_refused_before_anything_runs(
    asanoha_stack: StackFactory,
) -> None:
    stack = asanoha_stack(features=[jots], settings={"max_body_bytes": 4096})
    with serve_in_thread(stack.app.build_http()) as base_url:
        raw = RawMcp(f"{base_url}/mcp", stack)
        raw.open(TestUsers.admin)
        small = raw.post(TestUsers.admin, call_body("jots:write:jot:create", {"text": "ok"}))
        assert small.status_code == 200, small.text
        big = call_body("jots:write:jot:create", {"text": "x" * 5000})
        with stack.nothing_written():
            response = raw.post(TestUsers.admin, big)
    assert response.status_code == 413
    error = response.json()["error"]
    assert (error["code"], error["reason"]) == ("payload_too_large", "payload_too_large")
    assert error["details"]["limit"] == 4096
    assert jot_count(stack) == 1


def test_a_too_deep_tool_call_is_refused_before_anything_runs(
    asanoha_stack: StackFactory,
) -> None:
    stack = asanoha_stack(features=[jots])
    depth = stack.app.settings.max_json_depth
    with serve_in_thread(stack.app.build_http()) as base_url:
        raw = RawMcp(f"{base_url}/mcp", stack)
        raw.open(TestUsers.admin)
        deep = call_body("jots:write:jot:create", {"text": "deep", "data": nested(depth)})
        with stack.nothing_written():
            response = raw.post(TestUsers.admin, deep)
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["code"], error["reason"]) == ("validation_error", "json_too_deep")
    assert error["details"]["max_depth"] == depth
    assert jot_count(stack) == 0


def test_a_session_answers_only_the_principal_that_opened_it(stack: Stack) -> None:
    with serve_in_thread(stack.app.build_http()) as base_url:
        raw = RawMcp(f"{base_url}/mcp", stack)
        raw.open(ASSISTANT)
        assert raw.list_tools(ASSISTANT).status_code == 200
        for stranger in (TestUsers.other_tenant, TestUsers.admin):
            assert raw.list_tools(stranger).status_code == 404
            deleted = httpx2.delete(raw.url, headers=raw.headers(stranger), timeout=30)
            assert deleted.status_code == 404
        # A fresh token of the same principal (its agent run aside) keeps the session.
        again = raw.list_tools(ASSISTANT.as_agent("run-2"))
        assert again.status_code == 200
        assert "assist:query:prompt:list" in again.text


class TokenMcp(RawMcp):
    """A raw MCP session that sends one given bearer token (a personal access token)."""

    def __init__(self, url: str, stack: Stack, token: str) -> None:
        super().__init__(url, stack)
        self.token = token

    def headers(self, user: SessionUser) -> dict[str, str]:
        return {**super().headers(user), "Authorization": f"Bearer {self.token}"}


def test_a_personal_access_token_reaches_only_its_scopes_over_mcp(
    asanoha_stack: StackFactory,
) -> None:
    import datetime as dt

    stack = asanoha_stack(features=[jots])
    store = stack.app.tokens.access_tokens
    assert store is not None

    def token(scopes: str) -> str:
        return store.create(
            tenant_id=TestUsers.admin.tenant_id, user_id="ci", name="ci", scopes=scopes,
            lifetime=dt.timedelta(days=1), created_by="test", roles=["Admin"],
        ).token  # fmt: skip

    with serve_in_thread(stack.app.build_http()) as base_url:
        reader = TokenMcp(f"{base_url}/mcp", stack, token("jots:query:*"))
        reader.open(TestUsers.admin)
        with stack.nothing_written():
            refused = reader.post(
                TestUsers.admin, call_body("jots:write:jot:create", {"text": "x"})
            )
        writer = TokenMcp(f"{base_url}/mcp", stack, token("jots:*"))
        writer.open(TestUsers.admin)
        allowed = writer.post(TestUsers.admin, call_body("jots:write:jot:create", {"text": "x"}))
    assert refused.status_code == 200 and "token_scope_denied" in refused.text
    assert allowed.status_code == 200 and "token_scope_denied" not in allowed.text
    assert jot_count(stack) == 1


def test_an_identity_provider_token_opens_an_mcp_session(asanoha_stack: StackFactory) -> None:
    from tests.unit.identity.provider import (
        AUDIENCE,
        ISSUER,
        jwks_server,
        key_pair,
        provider_claims,
    )

    signer = key_pair("RS256")
    with jwks_server([signer]) as provider:
        stack = asanoha_stack(
            features=[jots],
            settings={"jwt_jwks_url": provider.url, "jwt_issuer": ISSUER, "jwt_audience": AUDIENCE},
        )
        good = signer.sign(provider_claims(sub="ci", tenant_id=TestUsers.admin.tenant_id))
        forged = key_pair("RS256", 1, kid=signer.kid).sign(provider_claims())
        with serve_in_thread(stack.app.build_http()) as base_url:
            session = TokenMcp(f"{base_url}/mcp", stack, good)
            session.open(TestUsers.admin)
            listed = session.list_tools(TestUsers.admin)
            refused = TokenMcp(f"{base_url}/mcp", stack, forged).post(
                TestUsers.admin, {"jsonrpc": "2.0", "id": 1, "method": "ping"}
            )
    assert listed.status_code == 200 and "jots:write:jot:create" in listed.text
    assert (refused.status_code, refused.json()["error"]["reason"]) == (401, "token_invalid")
