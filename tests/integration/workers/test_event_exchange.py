"""Task events go to an exchange of the application's own: a monitor (Flower) of one
application does not see another's tasks on the same broker."""

from __future__ import annotations

import contextlib
import secrets
import time
import uuid
from typing import Any

from asanoha.app import App
from asanoha.platform.settings import Settings
from tests.integration.workers.conftest import BROKERS

#: Seconds to wait for an event that was sent.
EVENT_TIMEOUT = 30


def _app(broker: str, prefix: str) -> App:
    settings = Settings(
        database_url="sqlite+pysqlite:///:memory:", broker_url=BROKERS[broker], queue_prefix=prefix
    )
    return App([], settings)


def _send(app: App, task_id: str) -> None:
    with app.celery.events.default_dispatcher() as dispatcher:
        dispatcher.send("task-succeeded", uuid=task_id)


def test_a_monitor_receives_the_events_of_its_application_only(broker: str) -> None:
    suffix = secrets.token_hex(4)
    watched, other = _app(broker, f"ev-a-{suffix}"), _app(broker, f"ev-b-{suffix}")
    received: list[dict[str, Any]] = []
    try:
        with watched.celery.connection_for_read() as connection:
            receiver = watched.celery.events.Receiver(connection, handlers={"*": received.append})
            # From here on the receiver's queue is bound to the application's event exchange.
            with receiver.consumer_context(wakeup=False) as (consuming, _, _):
                others, own = str(uuid.uuid4()), str(uuid.uuid4())
                deadline = time.monotonic() + EVENT_TIMEOUT
                while own not in {event.get("uuid") for event in received}:
                    assert time.monotonic() < deadline, "the application's own event never came"
                    # Sent again each round: on Redis the receiver subscribes on its first
                    # read, and events published before that reach nobody. The other
                    # application's event goes first: had it been routed here, it would
                    # arrive before this application's own.
                    _send(other, others)
                    _send(watched, own)
                    with contextlib.suppress(TimeoutError):
                        consuming.drain_events(timeout=1)
    finally:
        watched.close()
        other.close()
    assert others not in {event.get("uuid") for event in received}
    assert {event["type"] for event in received if event.get("uuid") == own} == {"task-succeeded"}
