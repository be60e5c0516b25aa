from asanoha.platform.settings import Settings
from asanoha.workers.lanes import lane_queues, queue_name


def test_every_lane_has_a_prefixed_queue():
    assert queue_name("stack1", "worker") == "stack1.worker"
    assert lane_queues(Settings(queue_prefix="stack1")) == ("stack1.worker", "stack1.api")


def test_lane_queues_of_chosen_lanes_keep_their_order():
    assert lane_queues(Settings(queue_prefix="stack1"), ("api",)) == ("stack1.api",)
