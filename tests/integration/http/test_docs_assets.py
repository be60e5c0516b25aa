"""``/docs`` loads Swagger UI from the API itself, never from a CDN."""

from __future__ import annotations

import re

from asanoha.testing import Stack


def test_docs_page_loads_every_asset_from_the_api(stack: Stack) -> None:
    page = stack.http.client.get("/docs")
    assert page.status_code == 200
    sources = re.findall(r'(?:src|href)="([^"]+)"', page.text)
    assert sources, page.text
    for source in sources:
        assert source.startswith("/docs/assets/"), source
        assert stack.http.client.get(source).status_code == 200, source
    assert "//" not in "".join(re.findall(r"url: '([^']*)'", page.text))  # the openapi URL


def test_docs_bundle_is_javascript(stack: Stack) -> None:
    bundle = stack.http.client.get("/docs/assets/swagger-ui-bundle.js")
    assert bundle.status_code == 200
    assert "javascript" in bundle.headers["content-type"]
    assert "SwaggerUIBundle" in bundle.text
