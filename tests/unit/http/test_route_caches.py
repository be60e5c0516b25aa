"""An app that closes is not kept alive by FastAPI's process-wide caches of route functions
(a process that builds app after app, as a test session does, would keep them all)."""

from __future__ import annotations

import gc
import weakref

from asanoha import App, Settings


def test_a_closed_app_whose_routes_served_is_collected() -> None:
    app = App([], Settings(database_url="sqlite:///:memory:", development=True))
    app.create_schema()
    with_routes = app.http
    assert with_routes.routes
    gone = weakref.ref(app)
    app.close()
    del app, with_routes
    gc.collect()
    assert gone() is None
