"""The MCP server over streamable HTTP, mounted in the API app at ``/mcp``, with the SDK's client."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import anyio
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from asanoha.platform.http import issue_token
from asanoha.platform.model import SessionUser
from asanoha.testing import Stack, TestUsers
from asanoha.testing.plugin import StackFactory
from asanoha.testing.serving import serve_in_thread
from tests.integration.agents.features import ASSISTANT, assist
from tests.integration.agents.scenario import run_scenario


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
