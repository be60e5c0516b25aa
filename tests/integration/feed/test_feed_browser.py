"""A browser follows the feed: a page with ``EventSource`` receives the events of 200 writes
by 8 concurrent writers, each once and in per-stream order, across two connections the
server cuts (the browser reconnects by itself with ``Last-Event-ID``)."""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import BrowserContext
from sqlalchemy import select

from asanoha.testing import Stack, TestUsers
from tests.integration.feed.conftest import Served

ADMIN = TestUsers.admin
LIVE_UPDATES = Path(__file__).resolve().parents[3] / "docs" / "guides" / "live-updates.md"
WRITERS = 8
#: Writes per writer: one create, then updates of the same row (one stream each).
WRITES_EACH = 25

PAGE_SCRIPT = """
(url) => {
  window.received = [];
  window.opened = 0;
  window.resumedFrom = [];
  const source = new EventSource(url);
  source.onopen = () => { window.opened += 1; };
  source.onmessage = (message) => {
    const event = JSON.parse(message.data);
    window.received.push({id: Number(message.lastEventId), stream: event.streamId,
                          version: event.version, type: event.type});
  };
  window.source = source;
}
"""


def write_stream(base_url: str, headers: dict[str, str], index: int, errors: list[Any]) -> None:
    """One writer: create a ticket, then update it ``WRITES_EACH - 1`` times."""
    try:
        with httpx.Client(base_url=base_url, headers=headers, timeout=60) as client:
            created = client.post(
                "/api/write/crm:write:ticket:create", json={"title": f"w{index}"}
            ).json()["data"]
            version = created["version"]
            for step in range(1, WRITES_EACH):
                answer = client.post(
                    "/api/write/crm:write:ticket:update",
                    json={
                        "id": created["id"],
                        "version": version,
                        "changes": {"title": f"w{index}-{step}"},
                    },
                )
                version = answer.json()["data"]["version"]
    except Exception as error:
        errors.append(error)


@pytest.mark.parametrize("stack", ["postgres"], indirect=True)
def test_a_browser_receives_every_event_once_across_cut_connections(
    stack: Stack, served: Served, browser: BrowserContext
) -> None:
    total = WRITERS * WRITES_EACH
    page = browser.new_page()
    page.goto(f"{served.base_url}/health")
    token = served.token(ADMIN)
    page.evaluate(PAGE_SCRIPT, f"/api/stream?types=crm:event:ticket.*&access_token={token}")
    page.wait_for_function("() => window.opened === 1")
    headers = {"Authorization": f"Bearer {token}"}
    errors: list[Any] = []
    writers = [
        threading.Thread(target=write_stream, args=(served.base_url, headers, i, errors))
        for i in range(WRITERS)
    ]
    for writer in writers:
        writer.start()
    # The server cuts the browser's connection twice while the writers write.
    for cut, at in enumerate((total // 4, total // 2), start=1):
        page.wait_for_function(f"() => window.received.length >= {at}")
        served.feed.close_subscriptions()
        page.wait_for_function(f"() => window.opened === {cut + 1}")
    for writer in writers:
        writer.join()
    assert errors == []
    page.wait_for_function(f"() => window.received.length >= {total}")
    received = page.evaluate("() => window.received")
    page.evaluate("() => window.source.close()")
    ids = [item["id"] for item in received]
    assert len(ids) == total and len(set(ids)) == total
    assert ids == sorted(ids)
    by_stream: dict[str, list[int]] = {}
    for item in received:
        by_stream.setdefault(item["stream"], []).append(item["version"])
    assert len(by_stream) == WRITERS
    for versions in by_stream.values():
        assert versions == list(range(1, WRITES_EACH + 1))
    # Every event of the run is there: the log holds no other id of these streams.
    with stack.app.database.connect() as conn:
        events = stack.app.service.tables.events
        logged = conn.execute(select(events.c.id).order_by(events.c.id)).scalars().all()
    assert ids == list(logged)


def guide_feed_example() -> str:
    """The JavaScript example of the live updates guide."""
    text = LIVE_UPDATES.read_text(encoding="utf-8")
    found = re.search(r"```javascript\n(.*?)```", text, flags=re.DOTALL)
    assert found is not None
    return found.group(1)


@pytest.mark.parametrize("stack", ["postgres"], indirect=True)
def test_the_guide_example_follows_the_feed_in_a_browser(
    stack: Stack, served: Served, browser: BrowserContext
) -> None:
    page = browser.new_page()
    page.goto(f"{served.base_url}/health")
    example = guide_feed_example().replace('"TOKEN"', repr(served.token(ADMIN)))
    # As a page script: its ``const``s stay in the page's scope.
    page.add_script_tag(content=example + "\nwindow.feed = feed;")
    page.wait_for_function("() => window.feed.readyState === 1")
    with page.expect_console_message(
        predicate=lambda message: "crm:event:ticket.created" in message.text
    ) as logged:
        row = stack.http.write_ok("crm:write:ticket:create", {"title": "from the guide"}, ADMIN)
    page.evaluate("() => window.feed.close()")
    line = logged.value.text
    assert line.split(" ")[2] == row["id"]
