"""pytest plugin: the ``asanoha_stack`` fixture."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

import pytest

from asanoha.platform.model import Feature
from asanoha.testing.celery_drain import asanoha_drain
from asanoha.testing.databases import (
    DatabaseKind,
    drop_templates,
    start_template_run,
    template_servers,
)
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


#: What a pytest-xdist worker reports to the main process: the servers it has templates on.
_TEMPLATE_SERVERS = "asanoha_template_servers"
#: The servers the workers reported (in the main process).
_reported_servers: set[str] = set()


def _is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def pytest_configure(config: pytest.Config) -> None:
    # Named before any worker starts, so that every worker of the run inherits the name.
    if not _is_xdist_worker(config):
        start_template_run()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """(pytest-xdist, main process) Note the servers a finished worker made templates on."""
    output = getattr(node, "workeroutput", None) or {}
    _reported_servers.update(output.get(_TEMPLATE_SERVERS, ()))


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Drop the run's template databases once every test is done: a worker hands its
    servers to the main process, which drops them after the last worker finished."""
    config = session.config
    if _is_xdist_worker(config):
        config.workeroutput[_TEMPLATE_SERVERS] = sorted(template_servers())  # type: ignore[attr-defined]
        return
    drop_templates(template_servers() | _reported_servers)


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
