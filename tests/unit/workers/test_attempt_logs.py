"""``AttemptLog`` keeps INFO and above, bounded in lines and bytes."""

from __future__ import annotations

import logging

from asanoha.workers.attempt_logs import MAX_BYTES, AttemptLog


def test_lines_past_the_byte_bound_are_counted_not_kept():
    log = AttemptLog(logging.getLogger("asanoha.job.test"), {})
    assert log.kept() is None
    for _ in range(100):
        log.info("%s", "é" * 1000)
    kept = log.kept()
    assert kept is not None
    *lines, marker = kept.splitlines()
    assert len(kept[: -len(marker)].encode()) <= MAX_BYTES
    assert marker == f"[{100 - len(lines)} more line(s) not kept]"


def test_an_exception_logged_keeps_its_type_and_message():
    log = AttemptLog(logging.getLogger("asanoha.job.test"), {})
    try:
        raise ValueError("bad row")
    except ValueError:
        log.exception("import failed")
    assert log.kept() == "ERROR import failed: ValueError: bad row"
