"""pytest plugin: the ``asanoha_stack`` fixture."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Protocol

import pytest

from asanoha.platform.model import Feature
from asanoha.testing.celery_drain import asanoha_drain
from asanoha.testing.databases import DatabaseKind
from asanoha.testing.stack import SettingsOverride, Stack

__all__ = ["StackFactory", "asanoha_drain", "asanoha_stack"]


class StackFactory(Protocol):
    """``asanoha_stack(features=[...], jobs=False, settings=None, database="postgres",
    tenants=None, replica=False)``."""

    def __call__(
        self,
        features: Iterable[Feature],
        *,
        jobs: bool = False,
        settings: SettingsOverride = None,
        database: DatabaseKind = "postgres",
        tenants: Callable[[], Iterable[str]] | None = None,
        replica: bool = False,
    ) -> Stack: ...


@pytest.fixture
def asanoha_stack() -> Iterator[StackFactory]:
    """A factory of isolated stacks; every stack it made is torn down after the test."""
    stacks: list[Stack] = []

    def make(
        features: Iterable[Feature],
        *,
        jobs: bool = False,
        settings: SettingsOverride = None,
        database: DatabaseKind = "postgres",
        tenants: Callable[[], Iterable[str]] | None = None,
        replica: bool = False,
    ) -> Stack:
        stack = Stack(
            features,
            jobs=jobs,
            settings=settings,
            database=database,
            tenants=tenants,
            replica=replica,
        )
        stacks.append(stack)
        return stack

    yield make
    failures: list[BaseException] = []
    for stack in reversed(stacks):
        try:
            stack.close()
        except Exception as exc:
            failures.append(exc)
    if failures:
        raise failures[0]
