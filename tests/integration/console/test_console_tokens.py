"""The console's Tokens page: an Admin sees the tenant's personal access tokens (never the
secrets) and revokes one; the token answers 401 token_revoked at once."""

from __future__ import annotations

import datetime as dt
from typing import Any

from asanoha.console.routes import mount_console
from asanoha.handlers import token_admin
from asanoha.platform.model import SessionUser
from asanoha.testing.http_client import TestClient
from asanoha.testing.plugin import StackFactory
from tests.integration.console.test_console_pages import sign_in

OPERATOR = SessionUser.of("op-1", "tenant-a", ["Admin", "SystemAdmin"])


def test_the_tokens_page_lists_and_revokes_a_token(asanoha_stack: StackFactory) -> None:
    stack: Any = asanoha_stack(features=[token_admin.feature])
    store = stack.app.tokens.access_tokens
    made = store.create(
        tenant_id="tenant-a", user_id="u-1", name="nightly-ci", scopes="tokens:query:*",
        lifetime=dt.timedelta(days=1), created_by="test", roles=["User"],
    )  # fmt: skip
    with TestClient(mount_console(stack.app.build_http(), stack.app)) as client:
        csrf = sign_in(client, stack.app.settings, OPERATOR)
        page = client.get("/console/tokens")
        assert "nightly-ci" in page.text and made.token not in page.text
        answer = client.post(
            "/console/tokens/revoke",
            data={"csrf": csrf, "id": made.row["id"]},
            follow_redirects=False,
        )
        assert answer.headers["location"].endswith("/console/tokens?notice=token-revoked")
        refused = client.post(
            "/api/query/tokens:query:list",
            json={},
            headers={"Authorization": f"Bearer {made.token}"},
        )
    assert (refused.status_code, refused.json()["error"]["reason"]) == (401, "token_revoked")
