"""The console's forms take what the API takes: a body within ``ASANOHA_MAX_BODY_BYTES``, a
JSON payload within ``ASANOHA_MAX_JSON_DEPTH`` and with numbers JSON can carry; whatever a
browser sends, the console never answers 5xx."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from asanoha import Feature, JobContext
from asanoha.console import mount_console
from asanoha.handlers import consumer_admin, job_admin
from asanoha.testing import TestUsers
from tests.integration.console.console_app import Switch, console_feature
from tests.integration.console.test_console_pages import ADMIN, sign_in

TENANT = TestUsers.admin.tenant_id
ECHO = "inputs:job:echo"
MAX_BODY_BYTES = 64 * 1024

inputs = Feature("inputs")


@inputs.job("echo", manual=True)
def echo(payload: dict[str, Any], ctx: JobContext) -> None:
    """A job an operator runs by hand from the Jobs page."""


@pytest.fixture
def stack(asanoha_stack: Any) -> Any:
    return asanoha_stack(
        features=[console_feature(Switch()), inputs, job_admin.feature, consumer_admin.feature],
        settings={"operator_tenant": TENANT, "max_body_bytes": MAX_BODY_BYTES},
    )


@pytest.fixture
def client(stack: Any) -> Iterator[TestClient]:
    with TestClient(mount_console(stack.app.build_http(), stack.app)) as client:
        yield client


def run_now(client: TestClient, csrf: str, payload: str) -> Any:
    return client.post(
        "/console/jobs/run",
        data={"csrf": csrf, "job": ECHO, "payload": payload},
        follow_redirects=False,
    )


def error_of(answer: Any) -> str:
    """The error a redirect back to a page carries."""
    assert answer.status_code == 303, answer.text
    return parse_qs(urlsplit(answer.headers["location"]).query)["error"][0]


def test_a_run_payload_nested_too_deep_is_refused_as_the_api_refuses_it(
    client: TestClient, stack: Any
) -> None:
    csrf = sign_in(client, stack.app.settings, ADMIN)
    # Deeper than Python's parser can recurse (1000), and just past the limit.
    for depth in (5_000, stack.app.settings.max_json_depth + 1):
        with stack.nothing_written():
            answer = run_now(client, csrf, "[" * depth + "]" * depth)
        assert error_of(answer) == "json_too_deep"
    api = stack.http.client.post(
        "/api/write/job-admin:write:run",
        content='{"job": "x", "payload": ' + "[" * 5_000 + "]" * 5_000 + "}",
        headers=stack.http.headers_for(ADMIN),
    )
    assert api.json()["error"]["reason"] == "json_too_deep"


def test_a_run_payload_with_a_number_json_cannot_carry_is_refused(
    client: TestClient, stack: Any
) -> None:
    csrf = sign_in(client, stack.app.settings, ADMIN)
    for payload in ('{"n": 1e400}', '{"n": NaN}', '{"n": ' + "9" * 5000 + "}"):
        with stack.nothing_written():
            answer = run_now(client, csrf, payload)
        assert error_of(answer) == "malformed_json"


def test_a_run_payload_within_the_limits_enqueues_the_job(client: TestClient, stack: Any) -> None:
    csrf = sign_in(client, stack.app.settings, ADMIN)
    answer = run_now(client, csrf, '{"deep": [[{"n": 1.5}]]}')
    assert answer.status_code == 303
    assert parse_qs(urlsplit(answer.headers["location"]).query)["notice"] == ["job-enqueued"]


def test_a_form_larger_than_the_body_limit_is_refused_with_413(
    client: TestClient, stack: Any
) -> None:
    csrf = sign_in(client, stack.app.settings, ADMIN)
    with stack.nothing_written():
        answer = run_now(client, csrf, json.dumps({"text": "x" * MAX_BODY_BYTES}))
    assert answer.status_code == 413
    assert "payload_too_large" in answer.text or "too large" in answer.text
    with stack.nothing_written():
        login = client.post("/console/login", data={"nonce": "n", "token": "t" * MAX_BODY_BYTES})
    assert login.status_code == 413


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=8,
)
payload_texts = st.one_of(
    st.text(max_size=60),
    json_values.map(json.dumps),
    st.integers(min_value=0, max_value=3000).map(lambda n: "[" * n + "]" * n),
    st.integers(min_value=0, max_value=3000).map(lambda n: '{"a":' * n + "1" + "}" * n),
    st.sampled_from(["1e400", "-1e400", "NaN", "Infinity", "9" * 5000, '{"a": 1', "\x00"]),
)
form_texts = st.one_of(st.text(max_size=40), st.sampled_from(["", "0", "²", "9" * 5000, "\x00"]))
forms = st.one_of(
    st.builds(
        lambda job, payload, delay: (
            "POST",
            "/console/jobs/run",
            {"job": job, "payload": payload, "delay": delay},
        ),
        st.one_of(st.just(ECHO), form_texts),
        payload_texts,
        form_texts,
    ),
    st.builds(
        lambda operation, job_id: ("POST", f"/console/jobs/{job_id}/{operation}", {}),
        st.one_of(
            st.sampled_from(["retry", "cancel"]),
            st.text(alphabet="abcxyz-", min_size=1, max_size=10),
        ),
        st.uuids(),
    ),
    st.builds(
        lambda operation, name, partition: (
            "POST",
            f"/console/consumers/{operation}",
            {"name": name, "partition": partition},
        ),
        st.one_of(st.sampled_from(["restart", "skip", "disable", "enable"]), st.just("nothing")),
        st.one_of(st.just("console:consumer:follow"), form_texts),
        st.one_of(st.sampled_from(["", "0", "1", "-1"]), form_texts),
    ),
    st.builds(
        lambda operation, target, job_id: (
            "POST",
            f"/console/pauses/{operation}",
            {"target": target, "id": job_id},
        ),
        st.one_of(st.sampled_from(["pause", "resume"]), st.just("nothing")),
        st.one_of(st.sampled_from([ECHO, "worker", "lane:api", "lane:nope"]), form_texts),
        st.one_of(st.uuids().map(str), form_texts),
    ),
    st.builds(
        lambda state, job, limit: (
            "GET",
            "/console/jobs",
            {"state": state, "job": job, "limit": limit},
        ),
        form_texts,
        form_texts,
        form_texts,
    ),
    st.builds(
        lambda nonce, token: ("POST", "/console/login", {"nonce": nonce, "token": token}),
        form_texts,
        form_texts,
    ),
)


def test_no_console_form_answers_a_server_error(client: TestClient, stack: Any) -> None:
    csrf = sign_in(client, stack.app.settings, ADMIN)

    @settings(
        max_examples=50,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(form=forms)
    def check(form: tuple[str, str, dict[str, str]]) -> None:
        method, path, fields = form
        if method == "GET":
            answer = client.get(path, params=fields)
        else:
            answer = client.post(path, data={"csrf": csrf, **fields})
        assert answer.status_code < 500, (path, fields, answer.text[:500])

    check()
    # The session survived every form: its pages still render.
    assert client.get("/console/jobs").status_code == 200
