from asanoha.platform.settings import Settings
from asanoha.workers.lanes import app_queues, lane_queues, platform_queue, queue_name


def test_every_lane_has_a_prefixed_queue():
    assert queue_name("stack1", "worker") == "stack1.worker"
    assert lane_queues(Settings(queue_prefix="stack1")) == ("stack1.worker", "stack1.api")


def test_lane_queues_of_chosen_lanes_keep_their_order():
    assert lane_queues(Settings(queue_prefix="stack1"), ("api",)) == ("stack1.api",)


def test_the_platform_tasks_have_prefixed_queues_of_their_own_after_the_lanes():
    settings = Settings(queue_prefix="stack1")
    assert platform_queue(settings, "consumers") == "stack1.consumers"
    assert app_queues(settings) == (
        "stack1.worker",
        "stack1.api",
        "stack1.consumers",
        "stack1.cron",
    )
    assert app_queues(settings, ("api",)) == ("stack1.api", "stack1.consumers", "stack1.cron")
