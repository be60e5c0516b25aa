"""``GET /docs``: Swagger UI served from the installed ``fastapi-offline`` package, no CDN, so
it works offline and in clusters that cannot reach the internet.

The package ships Swagger UI 5, which reads the OpenAPI 3.1 documents FastAPI writes (the
4.x bundles answer "Unable to render this definition").
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.staticfiles import StaticFiles

ASSETS_PATH = "/docs/assets"
#: Where the identity provider sends /docs back after Authorize.
REDIRECT_PATH = "/docs/oauth2-redirect"
#: The Swagger UI bundle, stylesheet and icon of ``fastapi-offline``.
ASSETS_FOLDER = Path(str(files("fastapi_offline") / "static"))


def add_docs_routes(api: FastAPI, *, oidc_client_id: str | None = None) -> None:
    """Register ``/docs`` and its assets (build ``api`` with ``docs_url=None``). With
    ``oidc_client_id`` (the console's client at the identity provider), Authorize signs in
    through the provider (authorization code flow with PKCE) and comes back to
    ``/docs/oauth2-redirect``."""
    api.mount(ASSETS_PATH, StaticFiles(directory=ASSETS_FOLDER), name="docs-assets")

    async def docs(request: Request) -> HTMLResponse:
        # root_path: the prefix a reverse proxy serves the API under.
        base = request.scope.get("root_path", "").rstrip("/")
        return get_swagger_ui_html(
            openapi_url=f"{base}{api.openapi_url}",
            title=f"{api.title} - Swagger UI",
            swagger_js_url=f"{base}{ASSETS_PATH}/swagger-ui-bundle.js",
            swagger_css_url=f"{base}{ASSETS_PATH}/swagger-ui.css",
            swagger_favicon_url=f"{base}{ASSETS_PATH}/favicon.png",
            oauth2_redirect_url=f"{base}{REDIRECT_PATH}" if oidc_client_id else None,
            # A public client: no secret in the page, PKCE instead.
            init_oauth=(
                {
                    "clientId": oidc_client_id,
                    "scopes": "openid",
                    "usePkceWithAuthorizationCodeGrant": True,
                }
                if oidc_client_id
                else None
            ),
        )

    async def redirect(request: Request) -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    if oidc_client_id:
        api.add_api_route(
            REDIRECT_PATH, redirect, methods=["GET"], include_in_schema=False, name="docs-oauth2"
        )
    api.add_api_route("/docs", docs, methods=["GET"], include_in_schema=False, name="docs")
