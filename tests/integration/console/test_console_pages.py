"""The console over HTTP (in-process): sign-in with a token kept in an HttpOnly,
SameSite=Strict cookie, pages of the signed-in tenant only, actions through the admin
handlers that need the session's CSRF token."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import select
from starlette.testclient import TestClient

from asanoha import ConsumerDeadError, JobFailedError
from asanoha.console import mount_console
from asanoha.handlers import consumer_admin, job_admin
from asanoha.platform.http import issue_token
from asanoha.platform.model import SessionUser
from asanoha.testing import TestUsers
from tests.integration.console.console_app import FOLLOW, NOTE_CREATE, SEND, Switch, console_feature

TENANT = TestUsers.admin.tenant_id
ADMIN = SessionUser.of("ops-a", TENANT, ["SystemAdmin"])
OTHER_ADMIN = SessionUser.of("ops-b", "tenant-b", ["SystemAdmin"])
CSRF = re.compile(r'name="csrf" value="([0-9a-f]+)"')
NONCE = re.compile(r'name="nonce" value="([^"]+)"')


@pytest.fixture
def failed_stack(asanoha_stack: Any) -> Any:
    """A stack whose job failed for good, after logging a line."""
    switch = Switch()
    stack = asanoha_stack(
        features=[console_feature(switch), job_admin.feature, consumer_admin.feature],
        jobs=True,
        settings={"operator_tenant": TENANT},
    )
    stack.switch = switch
    stack.http.write_ok(NOTE_CREATE, {"text": "hello"}, TestUsers.admin)
    with pytest.raises(JobFailedError):
        stack.drain()
    return stack


@pytest.fixture
def browser_client(failed_stack: Any) -> Iterator[TestClient]:
    with TestClient(mount_console(failed_stack.app.build_http(), failed_stack.app)) as client:
        yield client


def sign_in(client: TestClient, settings: Any, user: SessionUser) -> str:
    """Sign ``user`` in through the login form; the CSRF token of its session."""
    form = client.get("/console/login")
    nonce = NONCE.search(form.text)
    assert nonce is not None
    answer = client.post(
        "/console/login",
        data={"nonce": nonce.group(1), "token": issue_token(settings, user)},
        follow_redirects=False,
    )
    assert answer.status_code == 303, answer.text
    page = client.get("/console/jobs")
    found = CSRF.search(page.text)
    assert found is not None
    return found.group(1)


def job_state(stack: Any) -> str:
    outbox = stack.tables.outbox
    with stack.db.connect() as conn:
        return str(conn.execute(select(outbox.c.state).where(outbox.c.job_qn == SEND)).scalar())


def test_a_console_page_without_a_session_redirects_to_the_login(browser_client: TestClient):
    for path in ("/console", "/console/jobs", "/console/consumers", "/console/writes"):
        answer = browser_client.get(path)
        assert answer.url.path == "/console/login"
        assert "Sign in" in answer.text
    refused = browser_client.post("/console/jobs/run", data={}, follow_redirects=False)
    assert (refused.status_code, refused.headers["location"]) == (303, "/console/login")


def test_sign_in_keeps_the_token_in_an_http_only_same_site_strict_cookie(
    browser_client: TestClient, failed_stack: Any
) -> None:
    form = browser_client.get("/console/login")
    nonce = NONCE.search(form.text)
    assert nonce is not None
    answer = browser_client.post(
        "/console/login",
        data={"nonce": nonce.group(1), "token": issue_token(failed_stack.app.settings, ADMIN)},
        follow_redirects=False,
    )
    cookie = answer.headers["set-cookie"]
    assert cookie.startswith("asanoha_console=")
    assert "HttpOnly" in cookie
    assert "SameSite=strict" in cookie or "SameSite=Strict" in cookie
    assert "Path=/console" in cookie
    assert answer.headers["location"] == "/console/jobs"


def test_sign_in_refuses_a_token_without_the_role_a_bad_token_and_a_stale_form(
    browser_client: TestClient, failed_stack: Any
) -> None:
    settings = failed_stack.app.settings
    nonce = NONCE.search(browser_client.get("/console/login").text)
    assert nonce is not None
    lacking = browser_client.post(
        "/console/login",
        data={"nonce": nonce.group(1), "token": issue_token(settings, TestUsers.admin)},
    )
    assert lacking.status_code == 401
    assert "lacks the SystemAdmin role" in lacking.text
    forged = browser_client.post("/console/login", data={"nonce": nonce.group(1), "token": "x.y.z"})
    assert forged.status_code == 401
    stale = browser_client.post(
        "/console/login", data={"nonce": "another", "token": issue_token(settings, ADMIN)}
    )
    assert stale.status_code == 403
    assert "asanoha_console=" not in stale.headers.get("set-cookie", "")


def test_an_admin_sees_the_failed_job_its_logs_and_retries_it(
    browser_client: TestClient, failed_stack: Any
) -> None:
    csrf = sign_in(browser_client, failed_stack.app.settings, ADMIN)
    jobs = browser_client.get("/console/jobs")
    assert SEND in jobs.text
    assert "the mail server did not answer" in jobs.text
    assert "default-src 'none'" in jobs.headers["content-security-policy"]
    [row] = failed_stack.http.query_ok("job-admin:query:jobs", {}, ADMIN)
    page = browser_client.get(f"/console/jobs/{row['id']}")
    assert "sending note" in page.text
    assert 'id="retry"' in page.text

    with failed_stack.nothing_written():
        refused = browser_client.post(f"/console/jobs/{row['id']}/retry", data={})
    assert refused.status_code == 403
    with failed_stack.nothing_written():
        forged = browser_client.post(f"/console/jobs/{row['id']}/retry", data={"csrf": "0" * 64})
    assert forged.status_code == 403
    assert job_state(failed_stack) == "failed"

    failed_stack.switch.failing = False
    retried = browser_client.post(f"/console/jobs/{row['id']}/retry", data={"csrf": csrf})
    assert retried.status_code == 200
    assert "put back to pending" in retried.text
    failed_stack.drain()
    assert job_state(failed_stack) == "succeeded"
    done = browser_client.get(f"/console/jobs/{row['id']}")
    assert 'id="job-state">succeeded' in done.text
    # The retry went through the handler: its audit event names the console's principal.
    events = failed_stack.tables.events
    with failed_stack.db.connect() as conn:
        [event] = conn.execute(
            select(events.c.type, events.c.created_by).where(events.c.type.like("job-admin:%"))
        ).all()
    assert tuple(event) == ("job-admin:event:job-retried", "ops-a")


def test_an_operator_restarts_a_dead_consumer_and_its_lag_falls_to_zero(
    browser_client: TestClient, failed_stack: Any
) -> None:
    failed_stack.switch.failing = False
    failed_stack.http.write_ok(NOTE_CREATE, {"text": "poison"}, TestUsers.admin)
    with pytest.raises(ConsumerDeadError):
        failed_stack.drain()
    csrf = sign_in(browser_client, failed_stack.app.settings, ADMIN)
    page = browser_client.get("/console/consumers")
    assert FOLLOW in page.text
    assert "cannot follow a poisoned note" in page.text
    failed_stack.switch.poisoned = False
    restarted = browser_client.post(
        "/console/consumers/restart", data={"csrf": csrf, "name": FOLLOW}
    )
    assert restarted.status_code == 200
    assert "The consumer was restarted." in restarted.text
    failed_stack.consumers.run_once()
    [status] = failed_stack.http.query_ok("consumer-admin:query:status", {}, ADMIN)
    assert (status["status"], status["lag"]) == ("idle", 0)
    after = browser_client.get("/console/consumers")
    assert re.search(r'<td class="num lag">0</td>', after.text)


def test_another_tenants_admin_sees_none_of_it(
    browser_client: TestClient, failed_stack: Any
) -> None:
    sign_in(browser_client, failed_stack.app.settings, OTHER_ADMIN)
    jobs = browser_client.get("/console/jobs")
    [row] = failed_stack.http.query_ok("job-admin:query:jobs", {}, ADMIN)
    # The job's name is in the forms (the application declares it), no row or count of it.
    assert row["id"] not in jobs.text
    assert "/console/jobs?job=" not in jobs.text
    assert "mail server" not in jobs.text
    assert "No job rows." in jobs.text
    assert browser_client.get(f"/console/jobs/{row['id']}").status_code == 404
    consumers = browser_client.get("/console/consumers")
    assert "cannot follow" not in consumers.text
    assert "Restart</button>" not in consumers.text
    # Pauses hold every tenant's rows: it sees them, pausing is the operator tenant's.
    assert f'data-target="{SEND}"' in jobs.text
    assert "/console/pauses/" not in jobs.text
    csrf = CSRF.search(jobs.text)
    assert csrf is not None
    with failed_stack.nothing_written():
        refused = browser_client.post(
            "/console/pauses/pause", data={"csrf": csrf.group(1), "target": SEND}
        )
    assert "operator_required: " in refused.text
    writes = browser_client.get("/console/writes")
    assert "operator tenant only" in writes.text
    assert NOTE_CREATE not in writes.text


def test_the_operator_sees_writes_per_handler_and_outcome(
    browser_client: TestClient, failed_stack: Any
) -> None:
    sign_in(browser_client, failed_stack.app.settings, ADMIN)
    writes = browser_client.get("/console/writes")
    assert NOTE_CREATE in writes.text
    assert "Refusals by reason" in writes.text


def test_sign_out_ends_the_session(browser_client: TestClient, failed_stack: Any) -> None:
    csrf = sign_in(browser_client, failed_stack.app.settings, ADMIN)
    out = browser_client.post("/console/logout", data={"csrf": csrf})
    assert out.url.path == "/console/login"
    assert browser_client.get("/console/jobs").url.path == "/console/login"


def test_a_cookie_replayed_after_sign_out_is_refused_by_the_console_and_the_api(
    browser_client: TestClient, failed_stack: Any
) -> None:
    csrf = sign_in(browser_client, failed_stack.app.settings, ADMIN)
    token = browser_client.cookies["asanoha_console"]
    browser_client.post("/console/logout", data={"csrf": csrf})
    browser_client.cookies.set("asanoha_console", token)
    assert browser_client.get("/console/jobs").url.path == "/console/login"
    api = browser_client.post(
        "/api/query/job-admin:query:jobs", json={}, headers={"Authorization": f"Bearer {token}"}
    )
    assert (api.status_code, api.json()["error"]["reason"]) == (401, "token_revoked")


def test_page_notices_and_errors_come_from_a_fixed_list(
    browser_client: TestClient, failed_stack: Any
) -> None:
    sign_in(browser_client, failed_stack.app.settings, ADMIN)
    forged = browser_client.get(
        "/console/jobs", params={"notice": "Call +1 555 to verify", "error": "<b>phish</b>"}
    )
    # Whole strings: a page's random CSRF token may hold "555" itself.
    assert "Call +1 555 to verify" not in forged.text and "phish" not in forged.text
    known = browser_client.get(
        "/console/jobs", params={"notice": "job-retried", "error": "malformed_json"}
    )
    assert "The job was put back to pending." in known.text
    assert "malformed_json: " in known.text


def test_a_page_names_the_bundled_feature_the_application_lacks(asanoha_stack: Any) -> None:
    stack = asanoha_stack(features=[console_feature(Switch())])
    with TestClient(mount_console(stack.app.build_http(), stack.app)) as client:
        sign_in(client, stack.app.settings, ADMIN)
        jobs = client.get("/console/jobs")
        consumers = client.get("/console/consumers")
    assert "does not include <code>asanoha.handlers.job_admin.feature</code>" in jobs.text
    assert "does not include <code>asanoha.handlers.consumer_admin.feature</code>" in consumers.text


def test_the_console_runs_by_hand_only_jobs_declared_manual(
    browser_client: TestClient, failed_stack: Any
) -> None:
    csrf = sign_in(browser_client, failed_stack.app.settings, ADMIN)
    page = browser_client.get("/console/jobs")
    run_section = page.text.split("<h2>Run a job now</h2>", 1)[1]
    assert SEND not in run_section
    assert "manual=True" in run_section
    # A form sent all the same: the handler refuses it, and nothing is enqueued.
    with failed_stack.nothing_written():
        refused = browser_client.post(
            "/console/jobs/run", data={"csrf": csrf, "job": SEND, "payload": '{"id": "x"}'}
        )
    assert refused.status_code == 200
    assert "job_not_manual: " in refused.text
