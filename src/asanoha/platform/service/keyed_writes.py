"""Running a write under its caller's idempotency key: the ``idempotency`` and ``outcome``
steps of a write plan, around the steps between them.

``idempotency`` owns the key (whose it is, its digest, the statements that hold it and keep
an outcome); this module owns how a write runs under it: at the top in a transaction that
holds the key and keeps the outcome as its last statement, nested in a savepoint of the
caller's transaction. Either way a repeat answers the kept outcome without running anything,
a 4xx refusal is kept and raised, and a 5xx keeps nothing so that a repeat runs again.

A repeat re-applies what depends on when it is answered: the trust labels of the
instruction text the first call handed out, and the signed links of the files it showed,
minted again (``Files.relinked``) since the first call's may have expired.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import Connection

from asanoha.platform.errors import AsanohaError, ConflictError, Reasons
from asanoha.platform.personal import redaction
from asanoha.platform.service import idempotency
from asanoha.platform.service.files import Files
from asanoha.platform.service.idempotency import IdempotencyKey, Outcome, Replay
from asanoha.platform.service.instruction_reads import InstructionReads
from asanoha.platform.service.request import Request
from asanoha.platform.store import Database, Tables


class _Undo(Exception):
    """Roll the write back: its key got an outcome meanwhile, or it was refused (kept)."""


class KeyedWrites:
    """Runs writes under idempotency keys in one database."""

    def __init__(
        self,
        database: Database,
        tables: Tables,
        *,
        ttl_seconds: float,
        wait_seconds: float,
        files: Files | None = None,
    ) -> None:
        self._database = database
        self._tables = tables
        #: Mints the links of the files a kept answer shows again, for its repeats.
        self._files = files
        #: Seconds an outcome is kept (``ASANOHA_IDEMPOTENCY_TTL``).
        self.ttl_seconds = ttl_seconds
        #: Seconds a repeat waits for a running write with its key (``ASANOHA_IDEMPOTENCY_WAIT``).
        self.wait_seconds = wait_seconds

    def hold(
        self, conn: Connection, key: IdempotencyKey | None, replay: Replay | None
    ) -> Outcome | None:
        """The stored outcome of ``key`` (noted in ``replay``), or ``None``: run the write.
        Either way the transaction holds the key until it ends."""
        if key is None:
            return None
        stored = idempotency.hold(conn, self._tables, key, self.wait_seconds)
        if stored is not None and replay is not None:
            replay.replayed = True
        return stored

    def _replayed(
        self,
        conn: Connection,
        stored: Outcome,
        reads: InstructionReads | None,
        linked: list[tuple[str, str]] | None = None,
    ) -> Any:
        """The kept outcome answered to a repeat: its data with the links of its files
        minted now (its refusal raised again); its instruction text noted in ``reads``, its
        files in ``linked`` (a nested repeat's caller, keeping an answer of its own)."""
        stored.note_reads(reads)
        data = stored.answer()
        files = stored.linked
        if not files or self._files is None:
            return data
        if linked is not None:
            linked.extend(files)
        return self._files.relinked(conn, data, files)

    def run(
        self,
        key: IdempotencyKey,
        replay: Replay | None,
        run: Callable[[Connection], Any],
        reads: InstructionReads | None = None,
        linked: list[tuple[str, str]] | None = None,
    ) -> tuple[Any, bool]:
        """Run ``run(conn)`` in a transaction that holds ``key`` and keeps its outcome there;
        return the outcome's data and whether it is a stored one (the write did not run).

        The first call answers its outcome as it is kept (plain JSON data: ids and times as
        strings), so that the same call answers the same types however often it is sent.
        ``reads`` gets the instruction text the first call handed out. ``linked``: what
        ``run`` collects in its request's ``linked``, kept with the outcome.

        A refusal (4xx) rolls the write back and is kept in a transaction of its own, then
        raised. A write whose key got an outcome meanwhile (committed between this
        transaction's snapshot and its lock) is rolled back and answers that outcome.
        """
        # The refusal is kept: the personal values the write revealed are kept out of it.
        with redaction.revealing():
            return self._run_revealing(key, replay, run, reads, linked)

    def _run_revealing(
        self,
        key: IdempotencyKey,
        replay: Replay | None,
        run: Callable[[Connection], Any],
        reads: InstructionReads | None,
        linked: list[tuple[str, str]] | None,
    ) -> tuple[Any, bool]:
        refused: AsanohaError | None = None
        try:
            with self._database.begin() as conn:
                stored = self.hold(conn, key, replay)
                if stored is not None:
                    return self._replayed(conn, stored, reads), True
                try:
                    result = run(conn)
                except AsanohaError as error:
                    if not idempotency.is_storable(error):
                        raise
                    refused = error
                    raise _Undo from None
                outcome = Outcome.of_result(result, reads, linked)
                if not idempotency.keep(conn, self._tables, key, outcome, self.ttl_seconds):
                    raise _Undo
                return outcome.answer(), False
        except _Undo:
            pass
        with self._database.begin() as conn:
            stored = self.hold(conn, key, replay)
            if stored is not None:
                return self._replayed(conn, stored, reads), True
            if refused is not None:
                kept = Outcome.of_error(refused)
                idempotency.keep(conn, self._tables, key, kept, self.ttl_seconds)
        if refused is not None:
            raise refused
        raise ConflictError(Reasons.IDEMPOTENCY_IN_PROGRESS, key=key.key, handler=key.handler_qn)

    def run_nested(
        self,
        request: Request,
        key: IdempotencyKey | None,
        replay: Replay | None,
        run: Callable[[], Any],
    ) -> Any:
        """Run ``run()`` in a savepoint of ``request``'s transaction, under ``key`` if given:
        a stored outcome is answered without running it; a refusal rolls the savepoint back
        (and is kept under the key) and is raised; the enclosing transaction goes on."""
        stored = self.hold(request.conn, key, replay)
        if stored is not None:
            return self._replayed(request.conn, stored, request.reads, request.linked)
        if key is not None and redaction.current() is None:
            # Its refusal is kept: what the nested write reveals is kept out of it.
            with redaction.revealing():
                return self._run_savepoint(request, key, replay, run)
        return self._run_savepoint(request, key, replay, run)

    def _run_savepoint(
        self,
        request: Request,
        key: IdempotencyKey | None,
        replay: Replay | None,
        run: Callable[[], Any],
    ) -> Any:
        mark = request.mark()
        savepoint = request.conn.begin_nested()
        # A keyed write collects the links it shows apart from its caller's, and hands them on.
        outer = request.linked
        if key is not None:
            request.linked = []
        try:
            result = run()
            if key is not None:
                outcome = Outcome.of_result(result, request.reads, request.linked)
                if not idempotency.keep(request.conn, self._tables, key, outcome, self.ttl_seconds):
                    raise _Undo
                result = outcome.answer()
        except _Undo:
            savepoint.rollback()
            request.undo_to(mark)
            assert key is not None
            answer = self.hold(request.conn, key, replay)
            if answer is None:
                raise ConflictError(
                    Reasons.IDEMPOTENCY_IN_PROGRESS, key=key.key, handler=key.handler_qn
                ) from None
            return self._replayed(request.conn, answer, request.reads, request.linked)
        except BaseException as error:
            savepoint.rollback()
            request.undo_to(mark)
            if (
                key is not None
                and isinstance(error, AsanohaError)
                and idempotency.is_storable(error)
            ):
                kept = Outcome.of_error(error)
                idempotency.keep(request.conn, self._tables, key, kept, self.ttl_seconds)
            raise
        finally:
            if key is not None:
                collected, request.linked = request.linked, outer
                if outer is not None and collected:
                    outer.extend(collected)
        savepoint.commit()
        return result
