"""Every callable an application declares is called, never awaited: an async one is refused
when it is declared, with a message naming it and asking for a plain def."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from pydantic import BaseModel

from asanoha import Access, App, Concurrency, DefinitionError, Entity, Feature, fields

ADMIN = Access(roles=["Admin"])


class Empty(BaseModel):
    pass


async def fetch(payload: Empty, ctx: Any) -> Any:
    return {"fetched": True}


async def stream(payload: Empty, ctx: Any) -> AsyncIterator[Any]:
    yield {"fetched": True}


class AsyncCall:
    """A callable object whose ``__call__`` is async."""

    async def __call__(self, payload: Empty, ctx: Any) -> Any:
        return {"fetched": True}


class SyncCall:
    def __call__(self, payload: Empty, ctx: Any) -> Any:
        return {"fetched": True}


class Holder:
    async def method(self, payload: Empty, ctx: Any) -> Any:
        return {"fetched": True}


ASYNC_SHAPES = {
    "async def": fetch,
    "async generator": stream,
    "async __call__": AsyncCall(),
    "bound async method": Holder().method,
    "partial of async def": functools.partial(fetch),
}
NOT_ASYNC = "async handlers are not supported.*define it with a plain def, not async def"


@pytest.mark.parametrize("shape", ASYNC_SHAPES)
@pytest.mark.parametrize("kind", ["write", "query"])
def test_an_async_handler_is_refused_at_definition_naming_it(kind: str, shape: str) -> None:
    feature = Feature("aio")
    declare = feature.write_handler if kind == "write" else feature.query_handler
    register = declare("fetch", access=ADMIN, schema=Empty)
    with pytest.raises(DefinitionError, match=rf"^aio:{kind}:fetch: .* is async; {NOT_ASYNC}"):
        register(ASYNC_SHAPES[shape])
    assert feature.handlers == []


def test_a_sync_callable_object_is_accepted_as_a_handler() -> None:
    feature = Feature("aio")
    feature.write_handler("fetch", access=ADMIN, schema=Empty)(SyncCall())
    assert [handler.qn for handler in feature.handlers] == ["aio:write:fetch"]


@pytest.mark.parametrize("shape", ["async def", "async __call__", "async generator"])
def test_an_async_job_or_consumer_is_refused_in_every_shape(shape: str) -> None:
    feature = Feature("aio")
    with pytest.raises(DefinitionError, match=r"^aio:job:fetch: .*async jobs are not supported"):
        feature.job("fetch", manual=True)(ASYNC_SHAPES[shape])
    with pytest.raises(
        DefinitionError, match=r"^aio:consumer:mail: .*async consumers are not supported"
    ):
        feature.consumer("mail", on=["aio:event:sent"])(ASYNC_SHAPES[shape])
    assert (feature.jobs, feature.consumers) == ([], [])


def test_an_async_callable_object_hook_is_refused() -> None:
    feature = Feature("aio")
    feature.entity("thing", Entity(table="things", fields={"size": fields.integer()}))

    class AfterCommit:
        async def __call__(self, event: Any) -> None: ...

    with pytest.raises(DefinitionError, match="async after_commit hooks are not supported"):
        feature.after_commit("thing")(AfterCommit())


async def owns(row: Any, user: Any) -> bool:
    return False


async def upcast(values: dict[str, Any], verb: str) -> dict[str, Any]:
    return values


async def make_label() -> str:
    return "label"


async def tenants() -> list[str]:
    return ["tenant-a"]


async def key_of(payload: Any) -> Any:
    return payload["id"]


DECLARATIONS: dict[str, tuple[Callable[[], Any], str]] = {
    # A coroutine is truthy: an async owner would hand every row to every caller.
    "owner": (
        lambda: Feature("aio").crud(
            "thing",
            Entity(table="things", fields={"size": fields.integer()}),
            write=ADMIN,
            read=Access(roles=["Admin"], owner=owns),
        ),
        r"aio:query:thing:\w+: owns is async; async owner functions are not supported",
    ),
    "upcaster": (
        lambda: Feature("aio").event("renamed", version=2, upcasters={1: upcast}),
        r"event 'aio:event:renamed': upcast is async; async upcasters are not supported",
    ),
    "field default": (
        lambda: fields.text(personal=False, reason="fixture", default=make_label),
        r"fields.text\(default=...\): make_label is async; async defaults are not supported",
    ),
    "concurrency key": (
        lambda: Concurrency.sequential(key=key_of),
        r"Concurrency.sequential\(key=...\): key_of is async; async key functions are not",
    ),
    "tenants": (
        lambda: App(features=[Feature("aio")], tenants=tenants),
        r"App\(tenants=...\): tenants is async; async tenants functions are not supported",
    ),
}


@pytest.mark.parametrize("declaration", DECLARATIONS)
def test_every_other_declared_callable_refuses_async_def(declaration: str) -> None:
    declare, message = DECLARATIONS[declaration]
    with pytest.raises(DefinitionError, match=message) as refused:
        declare()
    assert "define it with a plain def, not async def" in str(refused.value)
