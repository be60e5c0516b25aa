"""A headless Chromium for tests that check what a person sees in a browser (the ``/docs``
page, the operator console), driven by Playwright.

The browser is Debian's ``chromium`` (``scripts/browser.sh`` installs it; CI runs that), not
one Playwright downloads: nothing is downloaded at test time. A missing browser fails the
test with the command that installs it, it is never skipped.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import BrowserContext, sync_playwright

#: The browser: ``ASANOHA_TEST_CHROMIUM`` or Debian's package.
CHROMIUM = Path(os.environ.get("ASANOHA_TEST_CHROMIUM") or "/usr/bin/chromium")
#: Flags that let Chromium run headless as root in a container, and keep it from talking to
#: anything but the page under test (no update checks, no sync, no QUIC probes).
CHROMIUM_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
#: Milliseconds a page may take to load and show what a test waits for.
PAGE_TIMEOUT_MS = 60_000


def require_chromium() -> Path:
    """The Chromium executable; fails (never skips) naming the install command."""
    if not os.access(CHROMIUM, os.X_OK):
        raise RuntimeError(
            f"no Chromium at {CHROMIUM}: run scripts/browser.sh (apt-get install -y chromium), "
            "or set ASANOHA_TEST_CHROMIUM to a Chromium executable"
        )
    return CHROMIUM


@contextmanager
def chromium_context(*, javascript: bool = True) -> Iterator[BrowserContext]:
    """A fresh browser (its own user-data folder, removed afterwards) and a context in it;
    ``javascript=False``: its pages run no script."""
    executable = require_chromium()
    profile = tempfile.mkdtemp(prefix="asanoha-chromium-")
    try:
        with sync_playwright() as playwright:
            context = playwright.chromium.launch_persistent_context(
                profile,
                executable_path=str(executable),
                headless=True,
                args=list(CHROMIUM_ARGS),
                timeout=PAGE_TIMEOUT_MS,
                java_script_enabled=javascript,
            )
            context.set_default_timeout(PAGE_TIMEOUT_MS)
            try:
                yield context
            finally:
                context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


__all__ = ["CHROMIUM", "CHROMIUM_ARGS", "chromium_context", "require_chromium"]
