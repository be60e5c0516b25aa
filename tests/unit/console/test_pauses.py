"""The Jobs page's pause table: every lane, then every job, held by its own pause or its
lane's as ``job-admin:query:pauses`` answers."""

from __future__ import annotations

from typing import Any

from asanoha import Feature
from asanoha.console.pauses import pause_rows
from asanoha.platform.model import Registry


def _registry() -> Registry:
    feature = Feature("shop")

    @feature.job("mail", manual=True)
    def mail(payload: dict[str, Any], ctx: Any) -> None:
        pass

    @feature.job("index", manual=True, lane="api")
    def index(payload: dict[str, Any], ctx: Any) -> None:
        pass

    return Registry([feature])


def test_nothing_paused_lists_lanes_then_jobs_all_running() -> None:
    rows = pause_rows(_registry(), {"pauses": [], "held": {}})
    assert [(row.target, row.kind, row.lane) for row in rows] == [
        ("lane:api", "lane", "api"),
        ("lane:worker", "lane", "worker"),
        ("shop:job:index", "job", "api"),
        ("shop:job:mail", "job", "worker"),
    ]
    assert not any(row.paused for row in rows)
    assert pause_rows(_registry(), None) == rows


def test_a_job_held_by_its_lane_is_paused_but_not_by_itself() -> None:
    answer = {
        "pauses": [
            {"target": "lane:api", "paused_at": "2026-12-01T00:00:00+00:00", "paused_by": "o"},
            {
                "target": "shop:job:mail",
                "paused_at": "2026-12-01T00:01:00+00:00",
                "paused_by": None,
            },
        ],
        "held": {"shop:job:index": "lane:api", "shop:job:mail": "shop:job:mail"},
    }
    rows = {row.target: row for row in pause_rows(_registry(), answer)}
    lane, index, mail = rows["lane:api"], rows["shop:job:index"], rows["shop:job:mail"]
    assert lane.paused_itself and lane.paused_by == "o"
    assert index.paused and not index.paused_itself and index.held_by == "lane:api"
    assert index.paused_at is None
    assert mail.paused_itself and mail.paused_at == "2026-12-01T00:01:00+00:00"
    assert not rows["lane:worker"].paused
