"""Console sign-in through the identity provider (authorization code flow with PKCE)
against a small local provider, in a real headless Chromium."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import BrowserContext

from asanoha.console.routes import mount_console
from asanoha.handlers import consumer_admin, job_admin
from asanoha.testing.http_client import TestClient
from asanoha.testing.plugin import StackFactory
from asanoha.testing.serving import serve_in_thread
from tests.integration.console.test_console_pages import CSRF, NONCE
from tests.unit.identity.provider import AUDIENCE, JwksServer, jwks_server, key_pair


@pytest.fixture
def provider() -> Iterator[JwksServer]:
    with jwks_server([key_pair("ES256")]) as running:
        now = int(time.time())
        running.access_claims = {
            "sub": "op-1", "tenant_id": "tenant-a", "roles": ["SystemAdmin"],
            "iss": running.issuer, "aud": AUDIENCE, "iat": now, "exp": now + 300,
            "jti": uuid.uuid4().hex,
        }  # fmt: skip
        yield running


@pytest.fixture
def stack(asanoha_stack: StackFactory, provider: JwksServer) -> Any:
    return asanoha_stack(
        features=[job_admin.feature, consumer_admin.feature],
        settings={
            "oidc_issuer": provider.issuer,
            "oidc_client_id": "console",
            "jwt_audience": AUDIENCE,
        },
    )


def test_the_console_signs_in_through_the_provider_in_a_browser(
    stack: Any, provider: JwksServer, browser: BrowserContext
) -> None:
    with serve_in_thread(mount_console(stack.app.build_http(), stack.app)) as base:
        page = browser.new_page()
        page.goto(f"{base}/console/login")
        page.click("#provider-login")
        page.wait_for_url(f"{base}/console/jobs*")
        assert page.locator("h1").first.inner_text() == "Jobs"
        [session] = [c for c in browser.cookies() if c["name"] == "asanoha_console"]
        assert stack.app.tokens.verify(session["value"]).id == "op-1"
        assert provider.codes == {}  # the code was redeemed, once


def test_a_callback_this_browser_did_not_start_is_refused(stack: Any) -> None:
    with TestClient(mount_console(stack.app.build_http(), stack.app)) as client:
        answer = client.get("/console/login/provider/back", params={"code": "c", "state": "s"})
        assert answer.status_code == 401
        assert "The sign-in at the identity provider failed." in answer.text
        assert "asanoha_console" not in client.cookies


def test_a_provider_token_without_a_jti_is_refused_after_sign_out(
    stack: Any, provider: JwksServer
) -> None:
    # Many providers issue access tokens without a jti: the session still ends at sign-out.
    claims = {key: value for key, value in provider.access_claims.items() if key != "jti"}
    token = key_pair("ES256").sign(claims)
    api = {"Authorization": f"Bearer {token}"}
    with TestClient(mount_console(stack.app.build_http(), stack.app)) as client:
        form = client.get("/console/login")
        nonce = NONCE.search(form.text)
        assert nonce is not None
        client.post("/console/login", data={"nonce": nonce.group(1), "token": token})
        page = client.get("/console/jobs")
        csrf = CSRF.search(page.text)
        assert page.url.path == "/console/jobs" and csrf is not None
        assert client.post("/api/query/job-admin:query:jobs", json={}, headers=api).is_success
        client.post("/console/logout", data={"csrf": csrf.group(1)})
        client.cookies.set("asanoha_console", token)
        assert client.get("/console/jobs").url.path == "/console/login"
        replayed = client.post("/api/query/job-admin:query:jobs", json={}, headers=api)
    assert (replayed.status_code, replayed.json()["error"]["reason"]) == (401, "token_revoked")
