"""Letting go of the route functions FastAPI remembers for the whole process.

FastAPI classifies each endpoint and dependency (coroutine, generator, plain function) once
and keeps the answer in process-wide ``lru_cache``s keyed by the function itself: up to
4,096 entries each, which keep the functions alive, and with them everything their closures
hold. An asanoha route closes over its ``App`` (service, registry, engines, tables), so a
process that builds apps one after the other (a test session: an app per test) kept dozens
of them alive, millions of objects that every full garbage collection walks (pauses of
several seconds, long enough to time out a ``drain()``). An app that closes empties those
caches: they are caches, so the apps still serving only classify their routes again.
"""

from __future__ import annotations

from typing import Any

#: The caches, by the name FastAPI gives them in ``fastapi.dependencies.models``; a FastAPI
#: without one of them has nothing of it to release.
_CACHES = (
    "_is_gen_callable_cached",
    "_is_async_gen_callable_cached",
    "_is_coroutine_callable_cached",
)


def release_route_functions() -> None:
    """Empty FastAPI's process-wide caches of endpoint and dependency functions."""
    from fastapi.dependencies import models

    for name in _CACHES:
        cached: Any = getattr(models, name, None)
        clear = getattr(cached, "cache_clear", None)
        if clear is not None:
            clear()
