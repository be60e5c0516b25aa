"""The broker probe of ``drain()`` waits a bounded time on RabbitMQ: a broker that stops
answering (a channel close it never acknowledges) cannot hang a drain or a teardown."""

from __future__ import annotations

import threading

import pytest
from celery import Celery

from asanoha.testing.stack import amqp_url_for_tests
from asanoha.workers.outcomes import JobOutcomes
from asanoha.workers.pending import make_probe


@pytest.mark.rabbitmq
def test_a_read_the_broker_never_answers_gives_up_after_the_timeout() -> None:
    celery = Celery(broker=amqp_url_for_tests())
    probe = make_probe(celery, JobOutcomes(celery), timeout=0.5)
    connection = probe._connection  # type: ignore[attr-defined]
    try:
        assert probe.count(["asanoha-probe-timeout-none"])[0] == {"asanoha-probe-timeout-none": 0}
        connection.ensure_connection()  # again: the missing queue's error closed it
        raised: list[BaseException] = []

        def read() -> None:
            try:
                connection.connection.drain_events()
            except BaseException as error:
                raised.append(error)

        # Nothing is coming on this connection: a read without a timeout would wait for ever
        # (in a thread of its own, so that such a regression fails instead of hanging).
        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(10)
        assert not reader.is_alive(), "the probe's read waited for ever"
        assert [type(error) for error in raised] == [TimeoutError]
    finally:
        probe.close()
