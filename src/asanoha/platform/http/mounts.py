"""Extra ASGI endpoints the API app hosts (the MCP endpoint), each with its own lifespan."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

from starlette.types import ASGIApp


@dataclass(frozen=True)
class AsgiMount:
    """An ASGI endpoint served at ``path``; ``lifespan`` runs while the API app runs."""

    path: str
    app: ASGIApp
    lifespan: Callable[[], AbstractAsyncContextManager[None]] | None = None


def combined_lifespan(
    mounts: Sequence[AsgiMount],
) -> Callable[[Any], AbstractAsyncContextManager[None]]:
    """One lifespan that enters every mount's lifespan, in order, and leaves them in reverse."""

    @contextlib.asynccontextmanager
    async def lifespan(_: Any) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            for mount in mounts:
                if mount.lifespan is not None:
                    await stack.enter_async_context(mount.lifespan())
            yield

    return lifespan
