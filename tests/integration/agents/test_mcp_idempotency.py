"""An idempotency key in a tool call's ``_meta``: a repeated call answers the first outcome."""

from __future__ import annotations

import anyio

from asanoha.agents import IDEMPOTENCY_META_KEY
from asanoha.testing import TestUsers
from asanoha.testing.plugin import StackFactory
from asanoha.testing.serving import serve_in_thread
from tests.integration.agents.scenario import data_of, error_of
from tests.integration.agents.test_mcp_http import jots, mcp_session

CREATE = "jots:write:jot:create"


def test_a_repeated_tool_call_with_one_key_writes_once(asanoha_stack: StackFactory) -> None:
    stack = asanoha_stack(features=[jots])

    async def scenario(base_url: str) -> None:
        async with mcp_session(f"{base_url}/mcp", stack, TestUsers.admin) as session:
            meta = {IDEMPOTENCY_META_KEY: "jot-1"}
            first = await session.call_tool(CREATE, {"text": "once"}, meta=meta)
            with stack.nothing_written():
                again = await session.call_tool(CREATE, {"text": "once"}, meta=meta)
                other = await session.call_tool(CREATE, {"text": "twice"}, meta=meta)
            assert data_of(again) == data_of(first)
            assert first.meta is None or "asanoha.dev/idempotentReplayed" not in first.meta
            assert again.meta is not None
            assert again.meta["asanoha.dev/idempotentReplayed"] is True
            assert error_of(other)["reason"] == "idempotency_key_reused"
            bad = await session.call_tool(CREATE, {"text": "x"}, meta={IDEMPOTENCY_META_KEY: 7})
            assert error_of(bad)["reason"] == "idempotency_key_invalid"

    with serve_in_thread(stack.app.build_http()) as base_url:
        anyio.run(scenario, base_url)
    assert stack.row_counts()["jots:jot"] == 1
