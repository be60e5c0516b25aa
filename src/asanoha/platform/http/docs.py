"""``GET /docs``: Swagger UI served from the installed ``swagger-ui-bundle`` package, no CDN, so
it works offline and in clusters that cannot reach the internet."""

from __future__ import annotations

from pathlib import Path

import swagger_ui_bundle
from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.staticfiles import StaticFiles

ASSETS_PATH = "/docs/assets"


def add_docs_routes(api: FastAPI) -> None:
    """Register ``/docs`` and its assets (build ``api`` with ``docs_url=None``)."""
    api.mount(
        ASSETS_PATH,
        StaticFiles(directory=Path(swagger_ui_bundle.swagger_ui_path)),
        name="docs-assets",
    )

    async def docs(request: Request) -> HTMLResponse:
        # root_path: the prefix a reverse proxy serves the API under.
        base = request.scope.get("root_path", "").rstrip("/")
        return get_swagger_ui_html(
            openapi_url=f"{base}{api.openapi_url}",
            title=f"{api.title} - Swagger UI",
            swagger_js_url=f"{base}{ASSETS_PATH}/swagger-ui-bundle.js",
            swagger_css_url=f"{base}{ASSETS_PATH}/swagger-ui.css",
            swagger_favicon_url=f"{base}{ASSETS_PATH}/favicon-32x32.png",
            oauth2_redirect_url=None,
        )

    api.add_api_route("/docs", docs, methods=["GET"], include_in_schema=False, name="docs")
