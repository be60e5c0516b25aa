"""Plain callables: every function an application hands the platform is called, never awaited.

Handlers, jobs, consumers, hooks, owner functions, concurrency keys, upcasters, field
defaults and the tenants of per-tenant crons all run inside a synchronous call (a write's
transaction, a Celery task, a consumer's pass). Called, an ``async def`` only makes a
coroutine: its body never runs and the coroutine would be taken for the result (a truthy
owner check, a row's data, a 200 answer). So each way of declaring one refuses it when it is
declared, through ``check_not_async``.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

from asanoha.platform.errors import DefinitionError


def is_async(func: Any) -> bool:
    """Whether calling ``func`` makes a coroutine or an async iterator instead of running it:
    an ``async def`` (generator too), a method or ``functools.partial`` of one, or an object
    whose ``__call__`` is one."""
    while isinstance(func, functools.partial):
        func = func.func
    if inspect.iscoroutinefunction(func) or inspect.isasyncgenfunction(func):
        return True
    if not callable(func) or inspect.isroutine(func) or isinstance(func, type):
        return False
    call = type(func).__call__
    return inspect.iscoroutinefunction(call) or inspect.isasyncgenfunction(call)


def check_not_async(func: Any, where: str, what: str, runs: str) -> None:
    """Refuse an async ``func`` declared as ``what`` at ``where``: a ``DefinitionError``
    naming both, saying why (``runs``: where it runs) and to define it with a plain def."""
    if is_async(func):
        name = getattr(func, "__qualname__", None) or type(func).__qualname__
        raise DefinitionError(
            f"{where}: {name} is async; async {what}s are not supported ({runs}, where a "
            f"coroutine's body never runs); define it with a plain def, not async def"
        )
