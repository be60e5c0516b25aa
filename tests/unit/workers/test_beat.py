import pytest
from celery.schedules import crontab

from asanoha.platform.errors import DefinitionError
from asanoha.platform.model import Feature, Registry
from asanoha.platform.settings import Settings
from asanoha.workers.beat import CRON_TASK_NAME, PRUNE_TASK_NAME, build_beat_schedule, parse_cron


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
    assert entry["args"] == ["clock:job:nightly"]
    assert entry["options"] == {"queue": "p1.worker"}
    assert schedule[PRUNE_TASK_NAME]["options"] == {"queue": "p1.worker"}
