"""The colour a state or an outcome is shown in, by what it means to an operator.

Only a failure is red: a job that failed for good, an attempt that crashed, a consumer dead
at an event. An attempt that failed and is tried again is a warning. What waits for its time
(a pending job, a paused one, an attempt snoozed or held back by a rate limit, a failed job an
operator requeued) is a waiting state, not an error, though its run row carries a text in
its error column ("requeued by ops-1").
"""

from __future__ import annotations

from typing import Literal

Tone = Literal["ok", "failure", "warning", "waiting", "neutral"]

#: Each state of a job row, a run row (an attempt's outcome) and a consumer cursor.
TONES: dict[str, Tone] = {
    "succeeded": "ok",
    "idle": "ok",
    "failed": "failure",
    "crashed": "failure",
    "dead": "failure",
    "retrying": "warning",
    "running": "warning",
    "pending": "waiting",
    "paused": "waiting",
    "requeued": "waiting",
    "snoozed": "waiting",
    "rate_limited": "waiting",
    # A workflow step whose predecessors have not succeeded yet.
    "waiting": "waiting",
    "cancelled": "neutral",
    "disabled": "neutral",
}
#: The tones whose text in an error column is an error (shown as one).
ERROR_TONES = frozenset({"failure", "warning"})


def tone_of(state: str | None) -> Tone:
    """The tone of ``state``; ``neutral`` for one this console does not know."""
    return TONES.get(state or "", "neutral")


def error_class(state: str | None) -> str:
    """The class of the error column of a row in ``state``: red only when it holds an error
    (a requeue's "requeued by ..." is a note)."""
    return "error-text" if tone_of(state) in ERROR_TONES else "note-text"
