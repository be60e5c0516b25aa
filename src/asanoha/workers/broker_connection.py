"""The broker connection of the application's Celery side: kombu's, with one repair for a
connection lost to Redis.

When a worker's connection to the broker fails, Celery's consumer first ``collect()``s it
(closing its channels, then releasing its transport) and then ``close()``s it. On Redis, a
channel whose close fails midway, before kombu marks it closed (its pending ``BRPOP`` read
raises on the dead socket, and the remote-control channel's close raises before the others
are reached), stays the connection's default channel. The second close then closes it
again, and to give back the messages it holds unacknowledged it asks the transport, now
released, for the broker's address: ``AttributeError: 'NoneType' object has no attribute
'hostname'``, which is no connection error, so the worker stops for good instead of
reconnecting (seen with kombu 5.7.0 and Celery 5.7.0).
"""

from __future__ import annotations

from typing import Any

from celery.app.amqp import AMQP
from kombu.connection import Connection


class BrokerConnection(Connection):
    """``kombu.Connection`` whose ``collect()`` forgets its default channel."""

    def collect(self, socket_timeout: float | None = None) -> Any:
        """Release the connection and its transport without talking to the broker, and
        forget the default channel: it belongs to the transport just released, so a later
        ``close()`` has nothing left to close. The messages that channel held
        unacknowledged stay in Redis's unacked hash, and the visibility sweep of any worker
        gives them back, as it does when the broker was unreachable for the close anyway."""
        try:
            return super().collect(socket_timeout)  # type: ignore[no-untyped-call]
        finally:
            self._default_channel = None


class BrokerAMQP(AMQP):  # type: ignore[misc]
    """Celery's AMQP part, making its connections ``BrokerConnection``s."""

    Connection = BrokerConnection
