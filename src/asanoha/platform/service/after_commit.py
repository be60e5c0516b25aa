"""What follows a committed write: publish its job rows, delete the content of the files its
forgets marked deleted, tell the commit listeners, run the entities' ``after_commit`` hooks
with its events.

The rule that lives here: nothing after the commit fails the write, whose caller gets its
result. A publish that fails leaves the job rows to the relay; a listener or a hook that
fails is logged (a hook's failure counted too) and the next one runs. ``Service.after_commit``
is the entry: every top-level write, batch and unit of work calls it once it has committed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from asanoha.platform.metrics import count_after_commit_failure
from asanoha.platform.model import Registry
from asanoha.platform.service import outbox
from asanoha.platform.service.files import Files
from asanoha.platform.service.outbox import OutboxPublisher
from asanoha.platform.service.request import Request
from asanoha.platform.store import Database, StoredEvent, Tables

CommitListener = Callable[[Sequence[StoredEvent]], None]
log = logging.getLogger("asanoha.service")


class AfterCommit:
    """The steps after the commits of one service, and its commit listeners."""

    def __init__(
        self, registry: Registry, database: Database, tables: Tables, files: Files
    ) -> None:
        self._registry = registry
        self._database = database
        self._tables = tables
        self._files = files
        #: Called with the events of every commit that appended some.
        self.listeners: list[CommitListener] = []

    def run(self, request: Request, publisher: OutboxPublisher | None) -> None:
        """Publish the request's outbox rows through ``publisher`` and tell the commit
        listeners. Never raises: the write has committed, so its caller gets its result; what
        fails is left to the relay."""
        if request.outbox:
            try:
                outbox.publish_messages(self._database, self._tables, publisher, request.outbox)
            except Exception:
                log.warning(
                    "publishing after commit failed; the relay sends the jobs", exc_info=True
                )
        if request.files_forgotten:
            try:
                self._files.purge()
            except Exception:
                log.warning(
                    "deleting forgotten files failed; the next forget retries", exc_info=True
                )
        if request.appended:
            for listener in self.listeners:
                try:
                    listener(request.appended)
                except Exception:
                    log.warning("commit listener %r failed", listener, exc_info=True)
            try:
                self._run_after_commit_hooks(request.appended)
            except Exception:
                # Each hook's failure is caught below; this is the bookkeeping around them.
                log.warning("running the after_commit hooks failed", exc_info=True)

    def _run_after_commit_hooks(self, events: Sequence[StoredEvent]) -> None:
        """Each entity's ``after_commit`` hooks with its committed events. A failure is logged
        and counted, never raised: the caller's write has committed."""
        for event in events:
            for hook in self._registry.hooks("after_commit", event.stream_type):
                try:
                    hook(event)
                except Exception:
                    count_after_commit_failure(event.stream_type)
                    log.exception(
                        "after_commit hook %r of %s failed on event %s",
                        hook,
                        event.stream_type,
                        event.id,
                    )
