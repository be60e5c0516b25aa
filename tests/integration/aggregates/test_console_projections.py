"""The console's Projections page and ``projection-admin:query:list``: each declared
projection with its table, mode and events; an async one with its consumer's lag, which the
page shows falling to 0 as the consumer delivers (in a real browser, without a reload)."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import BrowserContext, expect

from asanoha.console import mount_console
from asanoha.handlers import personal_data, projection_admin
from asanoha.platform.http import issue_token
from asanoha.platform.model import SessionUser
from asanoha.testing import TestUsers
from asanoha.testing.http_client import TestClient
from asanoha.testing.serving import serve_in_thread
from tests.integration.aggregates.features import ledger
from tests.integration.aggregates.test_async_projections import (
    KEEPER,
    LATER,
    _accounts,
    _catch_up,
    _deposit,
    views,
)
from tests.integration.console.test_console_pages import sign_in

INLINE = "ledger:projection:account-totals"
OPERATOR_TENANT = "ops"
OPERATOR = SessionUser.of("ops-1", OPERATOR_TENANT, ["SystemAdmin"])


@pytest.fixture(params=["postgres", "sqlite"])
def stack(request: pytest.FixtureRequest, asanoha_stack: Any) -> Any:
    return asanoha_stack(
        features=[ledger, personal_data.feature, views, projection_admin.feature],
        database=request.param,
        settings={"operator_tenant": OPERATOR_TENANT},
    )


def by_name(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {row["projection"]: row for row in rows}


def test_the_list_shows_each_projection_and_an_async_ones_lag(stack: Any) -> None:
    [account] = _accounts(stack, 1)
    for amount in (5, 7):
        _deposit(stack, account, amount)
    rows = by_name(stack.http.query_ok("projection-admin:query:list", {}, OPERATOR))
    assert rows[INLINE] | {"on": None} == {
        "projection": INLINE, "table": "ledger_account_totals", "mode": "inline", "on": None,
        "consumer": None, "partitions": 1, "position": None, "lag": 0, "status": "inline",
    }  # fmt: skip
    assert (rows[LATER]["mode"], rows[LATER]["consumer"], rows[LATER]["partitions"]) == (
        "async",
        KEEPER,
        2,
    )
    assert rows[LATER]["lag"] == 2
    # A tenant's system administrator sees its own lag; the other tenant has none.
    mine = by_name(stack.http.query_ok("projection-admin:query:list", {}, TestUsers.system_admin))
    assert mine[LATER]["lag"] == 2
    other = SessionUser.of("sa-b", TestUsers.other_tenant.tenant_id, ["SystemAdmin"])
    assert by_name(stack.http.query_ok("projection-admin:query:list", {}, other))[LATER]["lag"] == 0
    _catch_up(stack)
    rows = by_name(stack.http.query_ok("projection-admin:query:list", {}, OPERATOR))
    assert (rows[LATER]["lag"], rows[LATER]["status"]) == (0, "idle")
    # Nobody else: a plain Admin is refused.
    error = stack.http.query_err("projection-admin:query:list", {}, TestUsers.admin)
    assert (error.http_status, error.reason) == (403, "role_required")


def test_the_page_lists_the_projections(stack: Any) -> None:
    [account] = _accounts(stack, 1)
    _deposit(stack, account, 3)
    with TestClient(mount_console(stack.app.build_http(), stack.app)) as client:
        sign_in(client, stack.app.settings, OPERATOR)
        page = client.get("/console/projections").text
    inline_row = page.split(f'data-projection="{INLINE}"')[1].split("</tr>")[0]
    later_row = page.split(f'data-projection="{LATER}"')[1].split("</tr>")[0]
    assert "ledger_account_totals" in inline_row and ">inline<" in inline_row
    assert KEEPER in later_row and "2 partitions" in later_row
    assert '<td class="num lag">1</td>' in later_row


def test_without_the_bundled_feature_the_page_names_it(asanoha_stack: Any) -> None:
    stack = asanoha_stack(features=[ledger, personal_data.feature])
    with TestClient(mount_console(stack.app.build_http(), stack.app)) as client:
        sign_in(client, stack.app.settings, TestUsers.system_admin)
        page = client.get("/console/projections").text
    assert "asanoha.handlers.projection_admin.feature" in page


def test_the_page_shows_the_lag_fall_as_the_consumer_delivers(
    asanoha_stack: Any, browser: BrowserContext
) -> None:
    stack = asanoha_stack(
        features=[ledger, personal_data.feature, views, projection_admin.feature],
        settings={"operator_tenant": OPERATOR_TENANT},
    )
    [account] = _accounts(stack, 1)
    for amount in (1, 2, 3):
        _deposit(stack, account, amount)
    with serve_in_thread(mount_console(stack.app.build_http(), stack.app)) as base:
        page = browser.new_page()
        page.goto(f"{base}/console/login")
        page.fill("#token", issue_token(stack.app.settings, OPERATOR))
        page.click("form[action$='/login'] button[type=submit]")
        page.wait_for_url(f"{base}/console/jobs")
        page.click("nav >> text=Projections")
        page.wait_for_url(f"{base}/console/projections")
        lag = page.locator(f'tr[data-projection="{LATER}"] td.lag')
        expect(lag).to_have_text("3")
        _catch_up(stack)
        # The page reloads its table while a projection is behind: no reload by hand.
        expect(lag).to_have_text("0", timeout=60_000)
        assert page.url == f"{base}/console/projections"
