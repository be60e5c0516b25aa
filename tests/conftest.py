"""Fixtures shared by every test directory."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

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
