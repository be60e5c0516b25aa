"""``/docs`` as a person sees it: Swagger UI in a real headless Chromium renders every
operation of the OpenAPI 3.1 document, with nothing loaded from outside the API, and its
Authorize signs in through an identity provider."""

from __future__ import annotations

import time

from playwright.sync_api import BrowserContext, Request

from asanoha.testing import Stack
from asanoha.testing.plugin import StackFactory
from asanoha.testing.serving import serve_in_thread
from tests.integration.http.features import catalog
from tests.unit.identity.provider import jwks_server, key_pair

#: What Swagger UI shows when it cannot read the document.
UNRENDERABLE = "Unable to render this definition"


def test_docs_page_renders_every_operation_in_a_browser(
    stack: Stack, browser: BrowserContext
) -> None:
    document = stack.http.client.get("/openapi.json").json()
    assert document["openapi"].startswith("3.1")
    with serve_in_thread(stack.app.build_http()) as base_url:
        page = browser.new_page()
        outside: list[str] = []
        script_errors: list[str] = []

        def note_request(request: Request) -> None:
            if not request.url.startswith(base_url):
                outside.append(request.url)

        page.on("request", note_request)
        page.on("pageerror", lambda error: script_errors.append(str(error)))
        page.goto(f"{base_url}/docs")
        # Either the operations or Swagger UI's refusal to read the document.
        page.wait_for_function(
            "() => document.querySelector('.opblock-summary-path')"
            f" || document.body.innerText.includes({UNRENDERABLE!r})"
        )
        rendered = page.locator(".opblock-summary-path").evaluate_all(
            "nodes => nodes.map(node => node.getAttribute('data-path'))"
        )
        title = page.locator(".information-container .title").inner_text()
        body = page.locator("body").inner_text()
    assert UNRENDERABLE not in body
    assert title.startswith("asanoha")
    assert set(rendered) == set(document["paths"])
    for handler in stack.registry.handlers:
        assert f"/api/{handler.kind}/{handler.qn}" in rendered
    assert outside == []
    assert script_errors == []


def test_docs_authorize_signs_in_through_the_provider_in_a_browser(
    asanoha_stack: StackFactory, browser: BrowserContext
) -> None:
    with jwks_server([key_pair("ES256")]) as provider:
        now = int(time.time())
        provider.access_claims = {
            "sub": "op-1", "tenant_id": "tenant-a", "roles": ["Admin"],
            "iss": provider.issuer, "iat": now, "exp": now + 300,
        }  # fmt: skip
        stack = asanoha_stack(
            features=[catalog],
            settings={"oidc_issuer": provider.issuer, "oidc_client_id": "console"},
        )
        with serve_in_thread(stack.app.build_http()) as base_url:
            page = browser.new_page()
            page.goto(f"{base_url}/docs")
            page.click("button.authorize")
            page.locator(".auth-container", has_text="openIdConnect").locator(
                "button.authorize"
            ).first.click()
            page.wait_for_function(
                "() => ui.authSelectors.authorized().getIn(['openIdConnect', 'token'])"
            )
            token = page.evaluate(
                "() => ui.authSelectors.authorized().getIn(['openIdConnect', 'token',"
                " 'access_token'])"
            )
        assert provider.codes == {}  # the code was redeemed, with its PKCE verifier
        assert stack.app.tokens.verify(token).id == "op-1"
