"""Fixtures shared by every test directory."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import BrowserContext

from tests.browser import chromium_context
from tests.private_redis import PrivateRedis


@pytest.fixture
def private_redis() -> Iterator[PrivateRedis]:
    """A running private ``redis-server`` on a port of its own (stopped after the test)."""
    server = PrivateRedis()
    server.start()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def browser() -> Iterator[BrowserContext]:
    """A headless Chromium of this test alone (see ``tests/browser.py``); open pages with
    ``browser.new_page()``."""
    with chromium_context() as context:
        yield context
