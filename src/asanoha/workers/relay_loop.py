"""The relay of every worker: a light loop in the worker's main process that publishes due
job rows (publishes that failed after commit, retries held in the database) and ends
attempts whose end was lost (see ``recover_lost_attempts``).

Rows are taken ``FOR UPDATE SKIP LOCKED``, so the workers of a fleet share the work. The
loop's database connection is opened per pass and closed after it: the main process forks
the pool's processes, and a connection it held would be shared with them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from asanoha.platform.service import OutboxPublisher
from asanoha.platform.service.outbox import relay_outbox
from asanoha.platform.store import Database, Tables
from asanoha.workers.job_rows import recover_lost_attempts

log = logging.getLogger("asanoha.relay")

#: Rows one statement takes; a pass repeats while full batches come back.
BATCH = 100


class RelayLoop:
    """Publishes due job rows every ``interval`` seconds on a thread of its own."""

    def __init__(
        self,
        database_url: str,
        tables: Tables,
        publisher: OutboxPublisher,
        interval: float,
        *,
        retries_of: Callable[[str], int],
        lost_after: float,
    ) -> None:
        self._database_url = database_url
        self._tables = tables
        self._publisher = publisher
        self._interval = interval
        self._retries_of = retries_of
        #: Seconds after which a running attempt without an end, or a published message not
        #: claimed, counts as lost.
        self._lost_after = lost_after
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the loop (once)."""
        if self._thread is not None:
            return
        self._stopping.clear()
        self._thread = threading.Thread(target=self._loop, name="asanoha-relay", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the loop and wait for its pass to end."""
        self._stopping.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout=30)

    def relay_once(self) -> int:
        """One pass: end lost attempts, publish every due row; return how many were sent."""
        database = Database(self._database_url, pool_size=1)
        try:
            recover_lost_attempts(database, self._tables, self._retries_of, self._lost_after)
            sent = 0
            while not self._stopping.is_set():
                batch = relay_outbox(
                    database,
                    self._tables,
                    self._publisher,
                    limit=BATCH,
                    republish_after=self._lost_after,
                )
                sent += batch
                if batch < BATCH:
                    return sent
            return sent
        finally:
            database.dispose()

    def _loop(self) -> None:
        while not self._stopping.wait(self._interval):
            try:
                sent = self.relay_once()
            except Exception:
                log.warning("relay pass failed; trying again in %g s", self._interval,
                            exc_info=True)  # fmt: skip
            else:
                if sent:
                    log.info("relayed %d job message(s)", sent)
