"""``asanoha mcp`` over stdio, started as a process and driven by the SDK's own client."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from asanoha.agents.mcp_callers import TOKEN_ENV
from asanoha.platform.http import issue_token
from asanoha.testing import Stack
from asanoha.testing.plugin import StackFactory
from tests.integration.agents.features import ASSISTANT, assist
from tests.integration.agents.scenario import run_scenario

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def stack(asanoha_stack: StackFactory) -> Stack:
    return asanoha_stack(features=[assist])


def test_asanoha_mcp_over_stdio_lists_calls_and_requires_approval(stack: Stack) -> None:
    settings = stack.app.settings
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "asanoha.cli", "mcp", "--app", "tests.integration.agents.mcp_app:app"],
        env={
            "ASANOHA_DATABASE_URL": settings.database_url,
            "ASANOHA_JWT_SECRET": settings.jwt_secret,
            TOKEN_ENV: issue_token(settings, ASSISTANT),
            "PYTHONPATH": str(REPO),
        },
        cwd=REPO,
    )

    async def scenario() -> None:
        async with (
            stdio_client(server) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            await run_scenario(session, stack, same_process=False)

    anyio.run(scenario)
