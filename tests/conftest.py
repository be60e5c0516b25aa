"""Fixtures shared by every test directory."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from playwright.sync_api import BrowserContext

from tests.browser import chromium_context
from tests.private_redis import PrivateRedis


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--e2e",
        choices=("include", "skip", "only"),
        default="include",
        help="run the end-to-end tests (marked e2e) with the others, skip them, or run only "
        "them. scripts/test.sh runs the others on several pytest-xdist workers, then the "
        "end-to-end tests in a serial run of their own: they start fleets of processes.",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    choice = config.getoption("--e2e")
    if choice == "include":
        return
    wanted = choice == "only"
    kept: list[pytest.Item] = []
    deselected: list[pytest.Item] = []
    for item in items:
        is_e2e = item.get_closest_marker("e2e") is not None
        (kept if is_e2e == wanted else deselected).append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = kept


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # A pytest-xdist worker sends each report to the main process as UTF-8, which a lone
    # surrogate cannot be (the tests of error sanitising log one); unescaped, the worker dies.
    report.sections = [(title, _encodable(content)) for title, content in report.sections]
    if report.failed and report.longrepr is not None:
        text = str(report.longrepr)
        if _encodable(text) != text:
            report.longrepr = _encodable(text)


def _encodable(text: str) -> str:
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


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


@pytest.fixture(autouse=True)
def no_log_fields_from_an_earlier_test() -> None:
    """Start every test with no log fields bound: a job attempt run in this thread leaves its
    fields bound for the worker's lines about how it ended (a Celery worker's next task
    clears them), and a later test in the same process must not inherit them."""
    from asanoha.platform.log_context import clear_log_fields

    clear_log_fields()


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Between two tests of this suite, collect what the last one left and freeze what
    survives: the collector's full passes then walk only what the next test makes.

    A test process builds an application per test, and what outlives one (threads of its
    in-process worker finishing, caches of the libraries) adds up to millions of objects over
    a session. A full collection walked them all, pausing every thread for seconds at a
    time, a ``drain()``'s passes included, which then timed out with nothing stuck. Frozen,
    they cost nothing; what the frozen objects still let go is freed by reference count.
    """
    gc.collect()
    gc.freeze()
