import datetime as dt

import pytest
from celery.beat import BeatLazyFunc
from celery.schedules import crontab

from asanoha.platform.errors import DefinitionError
from asanoha.platform.model import Feature, Registry
from asanoha.platform.settings import Settings
from asanoha.workers.beat import (
    CRON_TASK_NAME,
    PRUNE_TASK_NAME,
    build_beat_schedule,
    latest_tick,
    parse_cron,
)


def test_a_five_field_expression_becomes_a_crontab():
    schedule = parse_cron("*/15 3 * * 1-5", "f:job:x")
    assert isinstance(schedule, crontab)
    assert schedule.minute == {0, 15, 30, 45}
    assert schedule.hour == {3}
    assert schedule.day_of_week == {1, 2, 3, 4, 5}


@pytest.mark.parametrize("expression", ["61 * * * *", "* * * * 8", "* * *", "every day"])
def test_a_bad_expression_fails_naming_the_job(expression):
    with pytest.raises(DefinitionError, match=r"f:job:x: cron="):
        parse_cron(expression, "f:job:x")


def test_the_schedule_has_every_cron_job_and_the_prune_but_no_relay():
    feature = Feature("clock")
    event = feature.event("ticked")

    @feature.job("nightly", cron="0 2 * * *", lane="api")
    def nightly(payload, ctx):
        return None

    @feature.job("manual", manual=True)
    def manual(payload, ctx):
        return None

    @feature.job("on-event", on=event.qn)
    def on_event(payload, ctx):
        return None

    settings = Settings(queue_prefix="p1", default_tenant="acme")
    schedule = build_beat_schedule(Registry([feature]), settings)
    assert set(schedule) == {"clock:job:nightly", PRUNE_TASK_NAME}
    entry = schedule["clock:job:nightly"]
    # Beat enqueues the job through the outbox (a job row), never sends the job itself.
    assert entry["task"] == CRON_TASK_NAME
    # The job, the tick's scheduled time and when beat sent it, computed as it sends.
    job_qn, tick, sent = entry["args"]
    assert (job_qn, isinstance(tick, BeatLazyFunc)) == ("clock:job:nightly", True)
    assert dt.datetime.fromisoformat(tick()).time() == dt.time(2, 0)
    assert abs(dt.datetime.fromisoformat(sent()) - dt.datetime.now(dt.UTC)) < dt.timedelta(hours=1)
    # Not a job lane: a tick never waits behind a backlog of jobs.
    assert entry["options"] == {"queue": "p1.cron"}
    assert schedule[PRUNE_TASK_NAME]["options"] == {"queue": "p1.cron"}


UTC = dt.UTC


@pytest.mark.parametrize(
    ("expression", "now", "tick"),
    [
        # On time, a little late, and a tick beat sends minutes late (missed while down).
        (
            "* * * * *",
            dt.datetime(2026, 5, 4, 12, 0, 0, 300, UTC),
            dt.datetime(2026, 5, 4, 12, 0, tzinfo=UTC),
        ),
        (
            "*/15 * * * *",
            dt.datetime(2026, 5, 4, 12, 16, 59, tzinfo=UTC),
            dt.datetime(2026, 5, 4, 12, 15, tzinfo=UTC),
        ),
        (
            "0 2 * * *",
            dt.datetime(2026, 5, 4, 1, 0, tzinfo=UTC),
            dt.datetime(2026, 5, 3, 2, 0, tzinfo=UTC),
        ),
        # Mondays at 9 (Celery: 1 = Monday); 2026-05-04 is a Monday.
        (
            "0 9 * * 1",
            dt.datetime(2026, 5, 10, 23, 0, tzinfo=UTC),
            dt.datetime(2026, 5, 4, 9, 0, tzinfo=UTC),
        ),
        (
            "30 6 29 2 *",
            dt.datetime(2026, 5, 4, 0, 0, tzinfo=UTC),
            dt.datetime(2024, 2, 29, 6, 30, tzinfo=UTC),
        ),
    ],
)
def test_the_tick_is_the_latest_time_the_expression_matches(expression, now, tick):
    assert latest_tick(parse_cron(expression, "f:job:x"), now) == tick


def test_ticks_between_lists_the_missed_ticks_oldest_first_bounded():
    from asanoha.workers.beat import parse_cron, ticks_between

    schedule = parse_cron("0 * * * *", "clock:job:hourly")
    since = dt.datetime(2026, 5, 4, 12, 0, tzinfo=UTC)
    until = dt.datetime(2026, 5, 4, 15, 30, tzinfo=UTC)
    found = ticks_between(schedule, since, until, limit=10)
    assert [tick.hour for tick in found] == [13, 14, 15]
    assert [tick.hour for tick in ticks_between(schedule, since, until, limit=2)] == [14, 15]
