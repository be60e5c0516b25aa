"""The due job rows nobody published: one query, read by ``/health/jobs`` and by the
``asanoha_outbox_due_*`` gauges of ``/metrics``, counting what the relay would publish."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import update

from asanoha import Feature
from asanoha.platform.model import SessionUser
from asanoha.platform.service.outbox import due_backlog
from asanoha.workers.job_health import check_job_backlog

SYSTEM = SessionUser.system("default")


def backlog_feature() -> Feature:
    feature = Feature("backlog")

    @feature.job("tick", manual=True)
    def tick(payload: dict[str, Any], ctx: Any) -> None:
        return None

    return feature


def gauges(stack: Any) -> tuple[float, float]:
    """``asanoha_outbox_due_rows`` and ``asanoha_outbox_due_age_seconds`` as scraped."""
    text = stack.http.client.get("/metrics").text
    samples = {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
    return samples["asanoha_outbox_due_rows"], samples["asanoha_outbox_due_age_seconds"]


@pytest.mark.parametrize("database", ["postgres", "sqlite"])
def test_readiness_and_metrics_count_only_rows_the_relay_would_publish(asanoha_stack, database):
    stack = asanoha_stack(features=[backlog_feature()], database=database)
    now = dt.datetime.now(dt.UTC)
    ten_minutes_ago = now - dt.timedelta(minutes=10)
    in_an_hour = now + dt.timedelta(hours=1)
    rows = {
        name: stack.service.enqueue_job("backlog:job:tick", {}, SYSTEM)
        for name in ("fresh", "lost", "held", "published", "finished")
    }
    changes = {
        # Its writer died before publishing: due for the relay, waiting ten minutes.
        "lost": {"not_before": ten_minutes_ago, "relay_after": ten_minutes_ago},
        # A retry waiting in the row for its backoff is not late.
        "held": {"not_before": in_an_hour, "relay_after": in_an_hour},
        "published": {"not_before": ten_minutes_ago, "published_at": ten_minutes_ago},
        "finished": {"not_before": ten_minutes_ago, "state": "succeeded", "finished_at": now},
    }
    # "fresh" is left to its writer (it publishes right after commit): not due yet.
    assert (due_backlog_now(stack).rows, gauges(stack)) == (0, (0.0, 0.0))
    outbox = stack.tables.outbox
    with stack.db.begin() as conn:
        for name, values in changes.items():
            conn.execute(update(outbox).where(outbox.c.id == rows[name]).values(**values))

    backlog = due_backlog_now(stack)
    assert backlog.rows == 1
    assert backlog.oldest_age >= 600
    due_rows, due_age = gauges(stack)
    assert due_rows == 1
    assert due_age >= 600
    cause = check_job_backlog(stack.db, stack.tables)
    # At least the ten minutes set above (a slow machine adds seconds).
    waited = re.fullmatch(r"the oldest due job has waited (\d+) s to be published", cause)
    assert waited is not None and int(waited[1]) >= 600, cause

    with stack.db.begin() as conn:
        conn.execute(update(outbox).where(outbox.c.id == rows["lost"]).values(published_at=now))
    assert (due_backlog_now(stack).rows, gauges(stack)) == (0, (0.0, 0.0))
    assert check_job_backlog(stack.db, stack.tables) == "ok"


def due_backlog_now(stack: Any) -> Any:
    with stack.db.connect() as conn:
        return due_backlog(conn, stack.tables)
