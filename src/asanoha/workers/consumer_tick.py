"""The safety net: every worker advances the consumers on a short interval, so delivery
never depends on a wake-up having been published (a broker hiccup, a crashed writer)."""

from __future__ import annotations

import logging
import threading
from typing import Any

from celery import Celery, bootsteps

from asanoha.platform.consumers import Consumers

log = logging.getLogger("asanoha.consumers")


class ConsumerTick:
    """A thread that calls ``consumers.run_once()`` every ``interval`` seconds."""

    def __init__(self, consumers: Consumers, interval: float) -> None:
        self._consumers = consumers
        self._interval = interval
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="asanoha-consumer-tick", daemon=True)

    def start(self) -> None:
        """Start ticking."""
        self._thread.start()

    def stop(self) -> None:
        """Stop after the running pass, if any."""
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stopped.wait(self._interval):
            try:
                self._consumers.run_once()
            except Exception:
                log.warning("advancing consumers failed; trying again next tick", exc_info=True)


def add_consumer_tick(celery: Celery, consumers: Consumers, interval: float) -> None:
    """Run a ``ConsumerTick`` in the main process of every worker of ``celery``."""

    class ConsumerTickStep(bootsteps.StartStopStep):  # type: ignore[misc]
        """Starts and stops the tick with the worker (after its pool: a prefork pool forks
        its children first, so they inherit no open connection of the tick's)."""

        requires = {"celery.worker.components:Pool"}

        def __init__(self, worker: Any, **kwargs: Any) -> None:
            super().__init__(worker, **kwargs)
            self.tick: ConsumerTick | None = None

        def start(self, worker: Any) -> None:
            self.tick = ConsumerTick(consumers, interval)
            self.tick.start()

        def stop(self, worker: Any) -> None:
            if self.tick is not None:
                self.tick.stop()
                self.tick = None

        shutdown = stop

    celery.steps["worker"].add(ConsumerTickStep)
