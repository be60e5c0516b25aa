from asanoha.platform.settings import Settings
from asanoha.workers.lanes import lane_queues, queue_name


def test_every_lane_has_a_prefixed_queue():
    assert queue_name("stack1", "worker") == "stack1.worker"
    assert lane_queues(Settings(queue_prefix="stack1")) == ("stack1.worker", "stack1.api")
