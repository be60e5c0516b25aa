import pytest
from pydantic import BaseModel

from asanoha.app import App
from asanoha.platform.errors import DefinitionError
from asanoha.platform.model import Access, Backoff, Feature
from asanoha.platform.settings import Settings
from asanoha.workers import make_celery
from asanoha.workers.beat import CRON_TASK_NAME, PRUNE_TASK_NAME
from asanoha.workers.consumer_wake import ADVANCE_TASK_NAME
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
    celery = make_celery(app).celery
    confirm = celery.tasks["shop:job:confirm"]
    assert confirm.max_retries == 2
    assert confirm.acks_late and confirm.reject_on_worker_lost
    assert celery.amqp.router.route({}, "shop:job:confirm")["queue"].name == "s1.worker"
    assert celery.amqp.router.route({}, "shop:job:report")["queue"].name == "s1.api"
    assert {CRON_TASK_NAME, PRUNE_TASK_NAME} <= set(celery.tasks)
    assert celery.conf.task_routes["shop:job:report"] == {"queue": "s1.api"}
    # The platform's own tasks are on queues of their own, never on a job lane.
    assert celery.amqp.router.route({}, ADVANCE_TASK_NAME)["queue"].name == "s1.consumers"
    assert celery.amqp.router.route({}, CRON_TASK_NAME)["queue"].name == "s1.cron"
    assert celery.amqp.router.route({}, PRUNE_TASK_NAME)["queue"].name == "s1.cron"


def test_reliability_and_monitoring_defaults():
    conf = make_celery(_app()).celery.conf
    assert conf.task_acks_late is True
    assert conf.task_reject_on_worker_lost is True
    assert conf.worker_prefetch_multiplier == 1
    assert conf.worker_send_task_events is True
    assert conf.task_send_sent_event is True


def test_the_in_memory_broker_polls_quickly_and_redis_gets_the_visibility_timeout():
    assert make_celery(_app()).celery.conf.broker_transport_options == {"polling_interval": 0.005}
    redis_app = _app(broker_url="redis://127.0.0.1:6379/0", visibility_timeout=900)
    options = make_celery(redis_app).celery.conf.broker_transport_options
    assert options["visibility_timeout"] == 900
    # The sweep that gives back a dead worker's messages follows the visibility timeout.
    assert options["unacked_restore_interval"] * options["unacked_restore_throttle"] <= 900 / 4
    # A broker that stops answering cannot hang a publish or a probe.
    assert options["socket_timeout"] and options["socket_connect_timeout"]


def test_the_celery_side_is_one_object_owning_its_publisher():
    app = _app(queue_prefix="s2")
    jobs = app.celery_jobs
    assert isinstance(jobs.publisher, CeleryOutboxPublisher)
    assert jobs.publisher.celery is jobs.celery is app.celery
    assert jobs.publisher.route("shop:job:report") == "s2.api"
    # Nothing of it hangs on the Celery app itself.
    assert not [name for name in vars(jobs.celery) if name.startswith("asanoha")]


def test_cron_jobs_and_the_prune_are_on_the_beat_schedule():
    schedule = make_celery(_app()).celery.conf.beat_schedule
    assert schedule["shop:job:report"]["task"] == CRON_TASK_NAME
    # The job, and the tick's scheduled time beat computes as it sends the tick.
    assert schedule["shop:job:report"]["args"][0] == "shop:job:report"
    assert "shop:job:confirm" not in schedule
    assert schedule[PRUNE_TASK_NAME]["task"] == PRUNE_TASK_NAME


def test_a_timeout_that_reaches_the_visibility_timeout_fails_at_boot():
    feature = Feature("slow")

    @feature.job("patient", manual=True, retries=5, timeout=8)
    def patient(payload, ctx):
        return None

    with pytest.raises(DefinitionError, match="slow:job:patient"):
        make_celery(_app(feature, visibility_timeout=10))


def test_a_job_without_timeout_gets_the_default_which_must_fit_too():
    feature = Feature("slow")

    @feature.job("open-ended", manual=True)
    def open_ended(payload, ctx):
        return None

    with pytest.raises(DefinitionError, match="ASANOHA_JOB_TIMEOUT"):
        make_celery(_app(feature, visibility_timeout=100))
    task = make_celery(_app(feature, job_timeout=30)).celery.tasks["slow:job:open-ended"]
    assert task.soft_time_limit == 30
    assert task.time_limit > 30


def test_long_backoffs_wait_in_the_database_not_in_the_broker():
    from asanoha.workers.retry_policy import broker_countdown_limit

    feature = Feature("slow")

    @feature.job("patient", manual=True, retries=5, timeout=20, backoff=Backoff.fixed(3600))
    def patient(payload, ctx):
        return None

    app = _app(feature, visibility_timeout=60)
    make_celery(app)  # a backoff longer than the visibility timeout is fine: the row holds it
    (job,) = app.registry.jobs
    limit = broker_countdown_limit(job, app.settings)
    # Whatever the broker holds, with the run after it, stays below the visibility timeout.
    assert limit > 0 and limit + 20 + 5 < 60


def test_control_and_event_exchanges_are_named_after_the_queue_prefix():
    # Two applications on one broker: neither's inspect, nor its Flower, sees the other.
    first = make_celery(_app(queue_prefix="shop-a")).celery.conf
    second = make_celery(_app(queue_prefix="shop-b")).celery.conf
    assert (first.control_exchange, first.event_exchange) == ("shop-a.control", "shop-a.events")
    assert (second.control_exchange, second.event_exchange) == ("shop-b.control", "shop-b.events")


def test_every_queue_is_declared_so_purge_reaches_all_of_them():
    queues = make_celery(_app(queue_prefix="s1")).celery.amqp.queues
    assert set(queues) == {"s1.worker", "s1.api", "s1.consumers", "s1.cron"}
    assert queues["s1.api"].exchange.name == "s1.api"
    assert queues["s1.api"].routing_key == "s1.api"
