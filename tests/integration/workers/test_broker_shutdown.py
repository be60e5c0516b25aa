"""A worker whose Redis shuts down while it holds unacknowledged messages reconnects instead
of stopping: Celery's recovery from a lost connection (collect it, then close it) runs
through without an error that is no connection error, and the messages it held stay in
Redis's unacked hash, for the visibility sweep to give back or their tasks to acknowledge."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import redis
from celery.utils.threads import bound_open_broker_sockets
from celery.worker.consumer.consumer import Consumer as CeleryConsumer
from kombu import Consumer, Exchange, Producer, Queue

from asanoha import Feature
from tests.private_redis import PrivateRedis

held = Feature("held")


@held.job("work", manual=True)
def work(payload: dict[str, Any], ctx: Any) -> None:
    """A job of the application whose Celery side the test connects with."""


# Celery's warning about tasks it may cancel on a connection loss, which the test leaves as is.
@pytest.mark.filterwarnings("ignore::celery.exceptions.CPendingDeprecationWarning")
def test_recovering_from_a_redis_shutdown_with_unacked_messages_raises_no_attribute_error(
    private_redis: PrivateRedis, asanoha_stack: Any
) -> None:
    stack = asanoha_stack(features=[held], settings={"broker_url": private_redis.url})
    celery = stack.app.celery_jobs.celery
    # The connection a worker's consumer opens, its channels as a running worker has them.
    connection = celery.connection_for_read()
    try:
        channel = connection.default_channel
        queue = Queue("held-work", Exchange("held-work", type="direct"), "held-work")
        producer = Producer(channel)
        for n in range(3):
            producer.publish({"n": n}, exchange=queue.exchange, routing_key="held-work",
                             declare=[queue])  # fmt: skip
        taken: list[Any] = []
        consumer = Consumer(
            channel, [queue], callbacks=[lambda body, message: taken.append(message)]
        )
        channel.basic_qos(prefetch_size=0, prefetch_count=1, apply_global=False)
        consumer.consume()
        while not taken:
            connection.drain_events(timeout=1)
        # Remote control: a fanout queue on a channel of its own.
        celery.control.mailbox(connection).Node(
            "worker@held", channel=connection.channel()
        ).listen()
        # The event loop keeps a BRPOP pending between two reads.
        channel._brpop_start()

        private_redis.stop()
        error = ConnectionError("Connection closed by server.")
        # What Celery's consumer runs on a connection error once it was connected.
        bound_open_broker_sockets(connection, 0.1)
        # (on a stand-in for the consumer: the attributes it reads).
        worker = SimpleNamespace(
            connection=connection, app=celery, qos_global=False, max_prefetch_count=1
        )
        CeleryConsumer.on_connection_error_after_connected(worker, error)
        assert worker.connection is None
    finally:
        connection.close()

    private_redis.start()
    client = redis.Redis.from_url(private_redis.url)
    try:
        # The message the worker held is not lost: the visibility sweep would give it back.
        assert client.hlen("unacked") == 1
        # Its task, ending once Redis is back, acknowledges it on the channel it came on.
        taken[0].ack()
        assert client.hlen("unacked") == 0
    finally:
        client.close()
