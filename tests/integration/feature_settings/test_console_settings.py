"""The console's Settings page: a tenant's configuration with where each value comes from,
which secrets are set (never their values), which toggleable features are on, and each
entity's retention policy; values and secrets set from the page go through
``config:write:set`` / ``secrets:write:set``, and a refused one keeps nothing."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from playwright.sync_api import BrowserContext, expect

from asanoha import Access, Entity, Feature, Retention, fields
from asanoha.console import mount_console
from asanoha.handlers import feature_config
from asanoha.platform.http import issue_token
from asanoha.platform.model import SessionUser
from asanoha.testing import TestUsers
from asanoha.testing.http_client import TestClient
from asanoha.testing.serving import serve_in_thread
from tests.integration.console.test_console_pages import sign_in
from tests.integration.feature_settings.features import SEEN, mailer

SECRET = "pw-c0nsole-51a7e"
#: A tenant's administrator who may open the console.
ADMIN = SessionUser.of("admin-a", TestUsers.admin.tenant_id, ["Admin", "SystemAdmin"])

archive = Feature("archive")
archive.crud(
    "record",
    Entity(
        table="archive_records",
        fields={"title": fields.text(personal=False, reason="a fixture title")},
        retention=Retention(keep_for="30d", strategy="block_delete"),
    ),
    write=Access(roles=["Admin"]),
    read=Access(roles=["Admin"]),
)


@pytest.fixture(params=["postgres", "sqlite"])
def stack(request: pytest.FixtureRequest, asanoha_stack: Callable[..., Any]) -> Any:
    SEEN.clear()
    return asanoha_stack(
        features=[mailer, archive, *feature_config.features], database=request.param
    )


@pytest.fixture
def console(stack: Any) -> Iterator[tuple[TestClient, str]]:
    """A client signed in to the console as ``ADMIN``, and its session's CSRF token."""
    with TestClient(mount_console(stack.app.build_http(), stack.app)) as client:
        yield client, sign_in(client, stack.app.settings, ADMIN)


def listed(stack: Any) -> dict[str, Any]:
    answer: dict[str, Any] = stack.http.query_ok("config:query:list", {}, TestUsers.admin)
    return answer


def test_the_page_shows_values_sources_secrets_switches_and_retention(
    stack: Any, console: tuple[TestClient, str]
) -> None:
    client, _ = console
    stack.http.write_ok(
        "secrets:write:set",
        {"feature": "mailer", "name": "smtp_password", "value": SECRET},
        TestUsers.admin,
    )
    with stack.db.begin() as conn:
        stack.app.service.feature_settings.set_enabled(
            conn, TestUsers.admin.tenant_id, "mailer", False, "test"
        )
    page = client.get("/console/settings")
    assert page.status_code == 200
    text = page.text
    assert 'data-key="mailer:sender"' in text and "noreply@example.org" in text
    assert 'data-secret="mailer:smtp_password"' in text
    assert SECRET not in text
    assert 'data-feature="mailer"' in text and ">off<" in text
    assert 'data-entity="archive:record"' in text and "30d" in text and "block_delete" in text
    # A key set for every tenant is offered only through the command line.
    region_row = text.split('data-key="mailer:region"')[1].split("</tr>")[0]
    assert "asanoha features config" in region_row and "<form" not in region_row


def test_a_value_set_from_the_page_holds_and_an_empty_one_goes_back_to_the_default(
    stack: Any, console: tuple[TestClient, str]
) -> None:
    client, csrf = console
    sent = {"csrf": csrf, "feature": "mailer", "key": "retries", "value": "5"}
    answer = client.post("/console/settings/config", data=sent, follow_redirects=False)
    assert answer.headers["location"].endswith("/console/settings?notice=config-set")
    by_key = {row["key"]: row for row in listed(stack)["config"] if row["feature"] == "mailer"}
    assert (by_key["retries"]["value"], by_key["retries"]["source"]) == (5, "tenant")
    client.post("/console/settings/config", data={**sent, "value": ""})
    by_key = {row["key"]: row for row in listed(stack)["config"] if row["feature"] == "mailer"}
    assert (by_key["retries"]["value"], by_key["retries"]["source"]) == (3, "default")


@pytest.mark.parametrize(
    ("sent", "reason"),
    [
        ({"feature": "mailer", "key": "retries", "value": "{not json"}, "malformed_json"),
        ({"feature": "mailer", "key": "retries", "value": '"many"'}, "config_value_invalid"),
        ({"feature": "mailer", "key": "nope", "value": "1"}, "config_key_not_found"),
        ({"feature": "mailer", "key": "region", "value": '"us"'}, "config_not_per_tenant"),
    ],
)
def test_a_refused_value_names_its_reason_and_keeps_nothing(
    stack: Any, console: tuple[TestClient, str], sent: dict[str, str], reason: str
) -> None:
    client, csrf = console
    with stack.nothing_written():
        answer = client.post(
            "/console/settings/config", data={"csrf": csrf, **sent}, follow_redirects=False
        )
    assert answer.headers["location"].endswith(f"/console/settings?error={reason}")
    shown = client.get(answer.headers["location"]).text
    assert f"{reason}:" in shown


def test_a_secret_set_and_removed_from_the_page_is_never_shown(
    stack: Any, console: tuple[TestClient, str]
) -> None:
    client, csrf = console
    sent = {"csrf": csrf, "feature": "mailer", "name": "smtp_password"}
    answer = client.post(
        "/console/settings/secret", data={**sent, "value": SECRET}, follow_redirects=False
    )
    assert answer.headers["location"].endswith("/console/settings?notice=secret-set")
    assert SECRET not in client.get(answer.headers["location"]).text
    sent_mail = stack.http.write_ok("mailer:write:send", {"to": "a@x.test"}, TestUsers.admin)
    assert (sent_mail["has_password"], sent_mail["password_length"]) == (True, len(SECRET))
    answer = client.post(
        "/console/settings/secret", data={**sent, "remove": "1"}, follow_redirects=False
    )
    assert answer.headers["location"].endswith("/console/settings?notice=secret-removed")
    assert {"feature": "mailer", "name": "smtp_password", "is_set": False} in listed(stack)[
        "secrets"
    ]


def test_without_the_bundled_feature_the_page_names_it(asanoha_stack: Any) -> None:
    stack = asanoha_stack(features=[archive])
    with TestClient(mount_console(stack.app.build_http(), stack.app)) as client:
        sign_in(client, stack.app.settings, ADMIN)
        page = client.get("/console/settings").text
    assert "asanoha.handlers.feature_config.features" in page
    assert 'data-entity="archive:record"' in page


def test_an_administrator_sets_a_value_and_a_secret_in_a_browser(
    asanoha_stack: Any, browser: BrowserContext
) -> None:
    stack = asanoha_stack(features=[mailer, archive, *feature_config.features])
    with serve_in_thread(mount_console(stack.app.build_http(), stack.app)) as base:
        page = browser.new_page()
        page.goto(f"{base}/console/login")
        page.fill("#token", issue_token(stack.app.settings, ADMIN))
        page.click("form[action$='/login'] button[type=submit]")
        page.wait_for_url(f"{base}/console/jobs")
        page.click("nav >> text=Settings")
        page.wait_for_url(f"{base}/console/settings")
        sender = page.locator('tr[data-key="mailer:sender"]')
        sender.locator("input[name=value]").fill('"ops@acme.test"')
        sender.locator("button[type=submit]").click()
        expect(page.locator("p.notice")).to_contain_text("saved for this tenant")
        expect(sender.locator("code.value")).to_have_text('"ops@acme.test"')
        secret = page.locator('tr[data-secret="mailer:smtp_password"]')
        secret.locator("input[name=value]").fill(SECRET)
        secret.locator("button", has_text="Set").click()
        expect(page.locator("p.notice")).to_contain_text("never shown again")
        expect(secret.locator("td.is-set")).to_have_text("yes")
        assert SECRET not in page.content()
    sent = stack.http.write_ok("mailer:write:send", {"to": "a@x.test"}, TestUsers.admin)
    assert (sent["sender"], sent["has_password"]) == ("ops@acme.test", True)
