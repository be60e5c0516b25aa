"""The console's pages read the replica (the bundled admin queries are declared
``replica=True``), and an operator's own action is on the next page at once: the action's
answer sets the read-after cookie, which the pages hand back."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from asanoha import JobFailedError
from asanoha.console import mount_console
from asanoha.handlers import consumer_admin, job_admin
from asanoha.platform.http.read_after import READ_AFTER_COOKIE
from asanoha.testing import TestUsers
from tests.integration.console.console_app import NOTE_CREATE, Switch, console_feature
from tests.integration.console.test_console_pages import ADMIN, TENANT, sign_in

pytestmark = pytest.mark.xdist_group("replica")


def test_an_operators_retry_is_on_its_next_page_while_the_replica_lags(
    asanoha_stack: Any, paused_replay: Any
) -> None:
    switch = Switch()
    stack = asanoha_stack(
        features=[console_feature(switch), job_admin.feature, consumer_admin.feature],
        jobs=True,
        settings={"operator_tenant": TENANT, "replica_max_lag": 60},
        replica=True,
    )
    stack.http.write_ok(NOTE_CREATE, {"text": "hello"}, TestUsers.admin)
    with pytest.raises(JobFailedError):
        stack.drain()
    [row] = stack.http.query_ok("job-admin:query:jobs", {}, ADMIN)
    stack.wait_for_replica()
    page = f"/console/jobs/{row['id']}"
    with (
        TestClient(mount_console(stack.app.build_http(), stack.app)) as operator,
        TestClient(mount_console(stack.app.build_http(), stack.app)) as colleague,
    ):
        csrf = sign_in(operator, stack.app.settings, ADMIN)
        sign_in(colleague, stack.app.settings, ADMIN)
        with paused_replay():
            switch.failing = False
            retried = operator.post(f"{page}/retry", data={"csrf": csrf})
            assert "put back to pending" in retried.text
            assert READ_AFTER_COOKIE in operator.cookies
            stack.drain()
            # The operator's page hands the cookie back: the primary answers.
            assert 'id="job-state">succeeded' in operator.get(page).text
            # A colleague's page is the replica's, which has not replayed the retry yet.
            assert 'id="job-state">failed' in colleague.get(page).text
        stack.wait_for_replica()
        assert 'id="job-state">succeeded' in colleague.get(page).text
