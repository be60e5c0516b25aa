"""``asanoha serve``: the HTTP API under uvicorn."""

from __future__ import annotations

from asanoha.cli.app_loading import AppOption, load_app
from asanoha.cli.schema_gate import require_current_schema


def serve(app: AppOption, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Serve the HTTP API with uvicorn.

    Refuses a database whose schema is behind (run asanoha migrate); on SQLite it creates
    and upgrades the schema itself.
    """
    import uvicorn

    loaded = load_app(app)
    require_current_schema(loaded, app)
    uvicorn.run(loaded.http, host=host, port=port)
