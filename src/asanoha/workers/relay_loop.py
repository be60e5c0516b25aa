"""The relay of every worker: a light loop in the worker's main process that publishes due
job rows (publishes that failed after commit, retries held in the database), sends again
the messages the broker lost (see ``resend_lost_messages``: a row is sent again only when
its queue holds fewer messages than there are rows waiting on it, never for its age alone)
and ends attempts whose end was lost (see ``recover_lost_attempts``).

Rows are taken ``FOR UPDATE SKIP LOCKED``, so the workers of a fleet share the work. The
loop keeps one connection of its own from pass to pass (checked before use): a connection per
pass would cost the database a new session every second on every worker. Pool processes
forked while it is open inherit its socket but never use it (the loop's thread does not run
in them, and they drop it at start), and psycopg leaves a connection alone in a process
other than the one that opened it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import os
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence

from asanoha.platform.jobs.attempts import recover_lost_attempts
from asanoha.platform.jobs.publishing import relay_outbox, resend_lost_messages
from asanoha.platform.service import OutboxPublisher
from asanoha.platform.service.job_pauses import paused_job_qns
from asanoha.platform.store import Database, Tables
from asanoha.workers.pending import BrokerProbe

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
        queue_of: Callable[[str], str],
        open_probe: Callable[[], BrokerProbe],
        job_lanes: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        self._database_url = database_url
        self._tables = tables
        self._publisher = publisher
        self._interval = interval
        self._retries_of = retries_of
        #: Seconds after which a running attempt without an end, or a published message not
        #: claimed, counts as lost.
        self._lost_after = lost_after
        self._queue_of = queue_of
        #: Lane -> its job QNs: a paused lane's rows are left alone.
        self._job_lanes = job_lanes or {}
        #: Opens the broker connection that counts the queues, on the first pass that needs it.
        self._open_probe = open_probe
        self._probe: BrokerProbe | None = None
        #: Rows the passes found without a message, and since when (``resend_lost_messages``).
        self._suspected: Mapping[uuid.UUID, dt.datetime] = {}
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._database: Database | None = None
        self._database_pid = 0

    def start(self) -> None:
        """Start the loop (once)."""
        if self._thread is not None:
            return
        self._stopping.clear()
        self._thread = threading.Thread(target=self._loop, name="asanoha-relay", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the loop, wait for its pass to end, and close its connection."""
        self._stopping.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout=30)
        database, self._database = self._database, None
        if database is not None and self._database_pid == os.getpid():
            database.dispose()
        probe, self._probe = self._probe, None
        if probe is not None:
            probe.close()

    def forget_inherited_connections(self, **_: object) -> None:
        """In a forked pool process: drop the parent's connection unclosed (a receiver of
        Celery's ``worker_process_init``)."""
        database, self._database = self._database, None
        if database is not None:
            database.forget_inherited_connections()
        # The broker socket is the parent's too; the child never counts queues.
        self._probe = None

    def relay_once(self) -> int:
        """One pass: end lost attempts, publish every due row, send again what the broker
        lost; return how many were sent."""
        database = self._own_database()
        recover_lost_attempts(database, self._tables, self._retries_of, self._lost_after)
        with database.connect() as conn:
            paused = paused_job_qns(conn, self._tables, self._job_lanes)
        sent = 0
        while not self._stopping.is_set():
            batch = relay_outbox(
                database,
                self._tables,
                self._publisher,
                limit=BATCH,
                paused=paused,
            )
            sent += batch
            if batch < BATCH:
                break
        if self._stopping.is_set():
            return sent
        lost = resend_lost_messages(
            database,
            self._tables,
            self._publisher,
            lost_after=self._lost_after,
            queue_of=self._queue_of,
            queue_depths=self._queue_depths,
            suspected=self._suspected,
            limit=BATCH,
        )
        self._suspected = lost.suspected
        return sent + lost.sent

    def _queue_depths(self, queues: Sequence[str]) -> Mapping[str, int]:
        if self._probe is None:
            self._probe = self._open_probe()
        try:
            depths, _ = self._probe.count(queues)
        except Exception:
            # A broker that restarted may leave the connection broken: the next pass opens
            # a new one.
            probe, self._probe = self._probe, None
            with contextlib.suppress(Exception):
                probe.close()
            raise
        return depths

    def _own_database(self) -> Database:
        if self._database is None or self._database_pid != os.getpid():
            # Pre-ping: a connection that died while idle (database restarted) is replaced
            # before the pass, not reported as a failed pass.
            self._database = Database(self._database_url, pool_size=1, pre_ping=True)
            self._database_pid = os.getpid()
        return self._database

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
