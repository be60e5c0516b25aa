import pytest
from pydantic import BaseModel

from asanoha.app import App
from asanoha.platform.errors import DefinitionError
from asanoha.platform.model import Access, Feature
from asanoha.platform.settings import Settings
from asanoha.workers import make_celery
from asanoha.workers.beat import RELAY_TASK_NAME
from asanoha.workers.outbox_publisher import CeleryOutboxPublisher


class Thing(BaseModel):
    name: str


def _feature() -> Feature:
    feature = Feature("shop")

    @feature.write_handler("order", access=Access(roles=["Admin"]))
    def order(payload: Thing, ctx):
        return None

    @feature.job("confirm", on="shop:write:order", retries=2)
    def confirm(payload, ctx):
        return None

    @feature.job("report", cron="0 6 * * *", lane="api")
    def report(payload, ctx):
        return None

    return feature


def _app(*features: Feature, **settings) -> App:
    options = {"database_url": "sqlite+pysqlite:///:memory:", "broker_url": "memory://"}
    return App(features or [_feature()], Settings(**(options | settings)))


def test_every_job_is_a_task_named_by_its_qn_on_its_lane_queue():
    app = _app(queue_prefix="s1")
    celery = make_celery(app)
    confirm = celery.tasks["shop:job:confirm"]
    assert confirm.max_retries == 2
    assert confirm.acks_late and confirm.reject_on_worker_lost
    assert celery.amqp.router.route({}, "shop:job:confirm")["queue"].name == "s1.worker"
    assert celery.amqp.router.route({}, "shop:job:report")["queue"].name == "s1.api"
    assert celery.amqp.router.route({}, RELAY_TASK_NAME)["queue"].name == "s1.worker"
    assert RELAY_TASK_NAME in celery.tasks
    assert celery.conf.task_routes["shop:job:report"] == {"queue": "s1.api"}


def test_reliability_and_monitoring_defaults():
    conf = make_celery(_app()).conf
    assert conf.task_acks_late is True
    assert conf.task_reject_on_worker_lost is True
    assert conf.worker_prefetch_multiplier == 1
    assert conf.worker_send_task_events is True
    assert conf.task_send_sent_event is True


def test_the_in_memory_broker_polls_quickly_and_redis_gets_the_visibility_timeout():
    assert make_celery(_app()).conf.broker_transport_options == {"polling_interval": 0.005}
    redis_app = _app(broker_url="redis://127.0.0.1:6379/0", visibility_timeout=900)
    assert make_celery(redis_app).conf.broker_transport_options == {"visibility_timeout": 900}


def test_building_the_celery_app_connects_the_outbox_publisher():
    app = _app(queue_prefix="s2")
    celery = app.celery
    publisher = app.service.publisher
    assert isinstance(publisher, CeleryOutboxPublisher)
    assert publisher.celery is celery
    assert publisher.route("shop:job:report") == "s2.api"


def test_cron_jobs_are_on_the_beat_schedule():
    schedule = make_celery(_app()).conf.beat_schedule
    assert "shop:job:report" in schedule
    assert "shop:job:confirm" not in schedule


def test_a_bad_cron_expression_fails_at_boot_naming_the_job():
    feature = Feature("clock")

    @feature.job("broken", cron="0 25 * * *")
    def broken(payload, ctx):
        return None

    with pytest.raises(DefinitionError, match="clock:job:broken"):
        make_celery(_app(feature))


def test_a_backoff_longer_than_the_visibility_timeout_fails_at_boot():
    feature = Feature("slow")

    @feature.job("patient", manual=True, retries=5)
    def patient(payload, ctx):
        return None

    with pytest.raises(DefinitionError, match="slow:job:patient"):
        make_celery(_app(feature, visibility_timeout=10))
