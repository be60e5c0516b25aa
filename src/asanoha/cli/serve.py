"""``asanoha serve``: the HTTP API under uvicorn."""

from __future__ import annotations

from asanoha.cli.app_loading import AppOption, load_app


def serve(app: AppOption, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Serve the HTTP API with uvicorn (creates missing tables first)."""
    import uvicorn

    loaded = load_app(app)
    loaded.create_schema()
    uvicorn.run(loaded.http, host=host, port=port)
