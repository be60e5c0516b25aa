"""The broker probe of ``drain()`` waits a bounded time on RabbitMQ: a broker that stops
answering (a channel close it never acknowledges) cannot hang a drain or a teardown."""

from __future__ import annotations

import socket
import threading
from urllib.parse import urlsplit, urlunsplit

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


class StallingProxy:
    """A TCP relay to the broker whose answers can be held back, as a network that stalls."""

    def __init__(self, host: str, port: int) -> None:
        self._upstream = (host, port)
        self.flowing = threading.Event()
        self.flowing.set()
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            broker = socket.create_connection(self._upstream)
            threading.Thread(target=self._pump, args=(client, broker, None), daemon=True).start()
            threading.Thread(
                target=self._pump, args=(broker, client, self.flowing), daemon=True
            ).start()

    @staticmethod
    def _pump(source: socket.socket, target: socket.socket, gate: threading.Event | None) -> None:
        try:
            while data := source.recv(65536):
                if gate is not None:
                    gate.wait()
                target.sendall(data)
        except OSError:
            pass
        finally:
            target.close()

    def close(self) -> None:
        self._server.close()


@pytest.mark.rabbitmq
def test_a_count_after_a_stalled_answer_asks_a_fresh_connection() -> None:
    url = urlsplit(amqp_url_for_tests())
    proxy = StallingProxy(url.hostname or "127.0.0.1", url.port or 5672)
    proxied = url._replace(netloc=f"{url.username}:{url.password}@127.0.0.1:{proxy.port}")
    celery = Celery(broker=urlunsplit(proxied))
    probe = make_probe(celery, JobOutcomes(celery), timeout=0.5)
    busy, idle = "asanoha-probe-stall-busy", "asanoha-probe-stall-idle"
    with celery.connection_for_write() as direct:
        channel = direct.default_channel
        for queue in (busy, idle):
            channel.queue_declare(queue=queue, auto_delete=False)
        channel.basic_publish(channel.prepare_message(b"waiting"), exchange="", routing_key=busy)
        try:
            assert probe.count([busy, idle])[0] == {busy: 1, idle: 0}
            proxy.flowing.clear()
            with pytest.raises(TimeoutError):
                probe.count([busy])
            proxy.flowing.set()
            # The stalled answer (busy: 1) arrives late; it must not be taken for idle's.
            assert probe.count([idle])[0] == {idle: 0}
            assert probe.count([busy, idle])[0] == {busy: 1, idle: 0}
        finally:
            for queue in (busy, idle):
                channel.queue_delete(queue=queue)
            probe.close()
            proxy.close()
