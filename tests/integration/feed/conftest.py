"""The live feed suite: a stack with the crm feature, served by uvicorn on a local port (the
in-process test client cannot stream)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from asanoha.platform.http import issue_token
from asanoha.platform.http.stream import feed_of
from asanoha.platform.model import SessionUser
from asanoha.testing import Stack
from asanoha.testing.serving import serve_in_thread
from tests.integration.feed.features import crm


@pytest.fixture(params=["postgres", "sqlite"])
def stack(request: pytest.FixtureRequest, asanoha_stack: Callable[..., Any]) -> Stack:
    """The crm feature on each database."""
    stack: Stack = asanoha_stack(features=[crm], database=request.param)
    return stack


class Served:
    """A stack's HTTP app on a real port, and its feed."""

    def __init__(self, stack: Stack, base_url: str, api: Any) -> None:
        self.stack = stack
        self.base_url = base_url
        self.feed = feed_of(api)

    def token(self, user: SessionUser, ttl: float | None = None) -> str:
        return issue_token(self.stack.app.settings, user, ttl)


def serve(stack: Stack) -> Iterator[Served]:
    """Serve ``stack`` until the block ends (every stream is closed first, so that the
    server can stop)."""
    api = stack.app.build_http()
    with serve_in_thread(api) as base_url:
        served = Served(stack, base_url, api)
        try:
            yield served
        finally:
            served.feed.close_subscriptions()


@pytest.fixture
def served(stack: Stack) -> Iterator[Served]:
    yield from serve(stack)
