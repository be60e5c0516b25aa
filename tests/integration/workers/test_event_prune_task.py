"""The daily prune of events past their type's ``keep_for=``: beat sends it only when a type
declares one (or an entity is declared: its streams closed by forget are pruned too, see
``tests/integration/aggregates/test_forgotten_streams.py``); a worker deletes those events (archived first to ``ASANOHA_EVENT_ARCHIVE_DIR``),
keeps every other event, and deletes nothing while a consumer has not handled them."""

from __future__ import annotations

import datetime as dt
import gzip
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from sqlalchemy import select, update

from asanoha import Access, Entity, Feature, StoredEvent, WriteContext, fields
from asanoha.platform.settings import Settings
from asanoha.workers.beat import PRUNE_EVENTS_TASK_NAME, build_beat_schedule
from asanoha.workers.cron_tasks import prune_declared_events
from asanoha.workers.lanes import platform_queue

ADMIN = Access(roles=["Admin"])


class Seen(BaseModel):
    page: str


def visits_feature(*, with_consumer: bool) -> Feature:
    """``viewed`` events kept 30 days, ``bookmarked`` ones for ever; optionally a consumer
    of the views that has not run yet."""
    visits = Feature("visits")
    viewed = visits.event("viewed", Seen, keep_for="30d")
    bookmarked = visits.event("bookmarked", Seen)

    @visits.write_handler("visit", access=ADMIN)
    def visit(payload: Seen, ctx: WriteContext) -> dict[str, Any]:
        ctx.append_event(viewed, {"page": payload.page}, stream_id=payload.page)
        ctx.append_event(bookmarked, {"page": payload.page}, stream_id=payload.page)
        return {}

    @visits.job("tidy", manual=True)
    def tidy(payload: dict[str, Any], ctx: Any) -> None:
        """The stack's worker serves a feature with a job."""

    if with_consumer:

        @visits.consumer("counter", on=[viewed.qn])
        def count(event: StoredEvent, ctx: Any) -> None:
            """Follows the views; the test never lets it run."""

    return visits


def event_types(stack: Any) -> list[str]:
    events = stack.tables.events
    with stack.db.connect() as conn:
        return list(conn.execute(select(events.c.type).order_by(events.c.id)).scalars())


def write_old_and_new(stack: Any) -> None:
    """Two visits 40 days old, one of today."""
    from asanoha.testing import TestUsers

    for page in ("a", "b"):
        stack.http.write_ok("visits:write:visit", {"page": page}, TestUsers.admin)
    events = stack.tables.events
    old = dt.datetime.now(dt.UTC) - dt.timedelta(days=40)
    with stack.db.begin() as conn:
        conn.execute(update(events).values(created_at=old))
    stack.http.write_ok("visits:write:visit", {"page": "c"}, TestUsers.admin)


def send_prune(stack: Any) -> None:
    queue = platform_queue(stack.app.settings, "cron")
    stack.app.celery.send_task(PRUNE_EVENTS_TASK_NAME, queue=queue)
    stack.drain()


def test_beat_sends_the_event_prune_only_when_a_type_declares_keep_for_or_an_entity_is_declared() -> (
    None
):
    from asanoha.platform.model import Registry

    settings = Settings()
    declared = build_beat_schedule(Registry([visits_feature(with_consumer=False)]), settings)
    assert declared[PRUNE_EVENTS_TASK_NAME]["schedule"].hour == {3}
    plain = Feature("plain")
    assert PRUNE_EVENTS_TASK_NAME not in build_beat_schedule(Registry([plain]), settings)
    # An entity's stream is closed by a forget, and pruned by the daily task.
    with_entity = Feature("registry")
    entry = Entity(table="pt_entries", fields={"n": fields.integer()})
    with_entity.crud("entry", entry, write=ADMIN, read=ADMIN)
    assert PRUNE_EVENTS_TASK_NAME in build_beat_schedule(Registry([with_entity]), settings)


@pytest.mark.parametrize("broker", ["redis"], indirect=True)
def test_the_daily_prune_archives_and_deletes_the_events_past_their_keep_for(
    jobs_stack: Any, tmp_path: Path
) -> None:
    stack = jobs_stack(
        [visits_feature(with_consumer=False)], event_archive_dir=str(tmp_path / "archive")
    )
    write_old_and_new(stack)
    send_prune(stack)
    # The two old views are gone; the old bookmarks (kept for ever) and today's visit stay.
    assert event_types(stack) == [
        "visits:event:bookmarked",
        "visits:event:bookmarked",
        "visits:event:viewed",
        "visits:event:bookmarked",
    ]
    (archive,) = (tmp_path / "archive").iterdir()
    with gzip.open(archive, "rt", encoding="utf-8") as lines:
        archived = [json.loads(line) for line in lines]
    assert [(row["type"], row["stream_id"]) for row in archived] == [
        ("visits:event:viewed", "a"),
        ("visits:event:viewed", "b"),
    ]


def test_the_daily_prune_deletes_nothing_while_a_consumer_lags(
    asanoha_stack: Any, caplog: pytest.LogCaptureFixture
) -> None:
    stack = asanoha_stack(features=[visits_feature(with_consumer=True)])
    write_old_and_new(stack)
    before = event_types(stack)
    with caplog.at_level(logging.WARNING, logger="asanoha.cron"):
        assert prune_declared_events(stack.app.service, stack.app.settings) == 0
    assert event_types(stack) == before
    assert "visits:consumer:counter" in caplog.text
    # Once the consumer has handled the views, the prune takes them.
    stack.consumers.run_once()
    assert prune_declared_events(stack.app.service, stack.app.settings) == 2
