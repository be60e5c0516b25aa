"""The feed's requests: a filter in a POST body, refusals of bad filters, heartbeats."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from asanoha.testing import Stack, TestUsers
from tests.integration.feed.conftest import Served, serve
from tests.integration.feed.features import crm
from tests.integration.feed.sse_client import SseStream

ADMIN = TestUsers.admin


@pytest.mark.parametrize("stack", ["sqlite"], indirect=True)
def test_a_post_body_filters_by_type_and_resumes_after_a_position(
    stack: Stack, served: Served
) -> None:
    stack.http.write_ok("crm:write:ticket:create", {"title": "not asked for"}, ADMIN)
    note = stack.http.write_ok("crm:write:note:create", {"text": "asked for"}, ADMIN)
    headers = {"Authorization": f"Bearer {served.token(ADMIN)}"}
    body = {"types": ["crm:event:note.*"], "streams": [note["id"]], "after": 0}
    with (
        httpx.Client(base_url=served.base_url, timeout=30) as client,
        client.stream("POST", "/api/stream", json=body, headers=headers) as response,
    ):
        assert response.status_code == 200
        stream = SseStream(response).read_until(lambda s: len(s.events) == 1)
    assert [m.json["streamId"] for m in stream.events] == [note["id"]]
    assert b"not asked for" not in bytes(stream.raw)


@pytest.mark.parametrize("stack", ["sqlite"], indirect=True)
@pytest.mark.parametrize(
    ("body", "path"),
    [
        ({"types": "crm:event:*"}, "types"),
        ({"types": ["crm:event:*", " "]}, "types"),
        ({"after": -1}, "after"),
        ({"kinds": []}, "kinds"),
        ([1], "$"),
    ],
)
def test_a_bad_filter_is_refused_naming_the_field(
    stack: Stack, served: Served, body: Any, path: str
) -> None:
    response = httpx.post(
        f"{served.base_url}/api/stream",
        json=body,
        headers={"Authorization": f"Bearer {served.token(ADMIN)}"},
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["code"], error["reason"]) == ("validation_error", "validation_failed")
    assert error["details"]["fields"][0]["path"] == path
    assert served.feed.subscriptions == frozenset()


def test_an_idle_stream_gets_heartbeat_comments(asanoha_stack: Callable[..., Any]) -> None:
    stack: Stack = asanoha_stack(
        features=[crm], database="sqlite", settings={"stream_heartbeat": 0.2}
    )
    for served in serve(stack):
        with (
            httpx.Client(base_url=served.base_url, timeout=30) as client,
            client.stream(
                "GET", "/api/stream", params={"access_token": served.token(ADMIN)}
            ) as response,
        ):
            stream = SseStream(response).read_until(lambda s: len(s.comments) >= 2)
        assert stream.comments[:2] == ["ping", "ping"]
        assert b"\n: ping\n\n" in bytes(stream.raw)
