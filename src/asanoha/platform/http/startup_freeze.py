"""What an API process builds before it serves, out of the garbage collector's way.

A full collection walks every tracked object: in an API process the registry, SQLAlchemy's
tables and statements, FastAPI's routes and models, and the modules, most of them alive
until the process ends. With 1,000 streams open it paused the server for 100-270 ms at a
time (``bench/stream.py``), which was the whole p99 of the live feed. ``gc.freeze`` moves
what exists once the app has started into a generation no collection walks; what is made
later is collected as before, and a frozen object freed by its reference count is freed as
before.

Once per process: the first app that starts freezes what is alive then (after a collection,
so nothing already garbage is kept). A process that builds many apps (a test session) does
not freeze each: each freeze would keep, for good, the cycles of the apps that came before.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

_frozen = False

Lifespan = Callable[[Any], AbstractAsyncContextManager[None]]


def freeze_after_startup(lifespan: Lifespan) -> Lifespan:
    """``lifespan``, then (the first time in the process) freeze what exists."""

    @contextlib.asynccontextmanager
    async def frozen(app: Any) -> AsyncIterator[None]:
        async with lifespan(app):
            freeze_once()
            yield

    return frozen


def freeze_once() -> None:
    """Collect, then freeze every tracked object, unless this process already did."""
    global _frozen
    if _frozen:
        return
    _frozen = True
    gc.collect()
    gc.freeze()


__all__ = ["freeze_after_startup"]
