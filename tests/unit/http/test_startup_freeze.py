"""The first API app that starts in a process freezes what exists; later ones do not."""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import AsyncIterator
from typing import Any

import pytest

from asanoha.platform.http import startup_freeze
from asanoha.platform.http.startup_freeze import freeze_after_startup


def test_the_first_startup_freezes_and_later_ones_leave_the_collector_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(startup_freeze, "_frozen", False)
    entered: list[str] = []

    @contextlib.asynccontextmanager
    async def mounts(_: Any) -> AsyncIterator[None]:
        entered.append("mounts")
        yield

    async def start_and_stop() -> int:
        async with freeze_after_startup(mounts)(None):
            return gc.get_freeze_count()

    try:
        assert asyncio.run(start_and_stop()) > 0
        gc.unfreeze()
        assert asyncio.run(start_and_stop()) == 0
    finally:
        gc.unfreeze()
    assert entered == ["mounts", "mounts"]
