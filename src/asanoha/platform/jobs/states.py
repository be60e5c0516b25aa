"""The states of a job row: ``pending -> running -> succeeded | failed | cancelled``.

Waiting (a delay, a backoff, a snooze, a paused job, a busy key) is no state of its own: it
is ``pending`` with a clock (``clocks``) and a claim condition (``guards``).
"""

from __future__ import annotations

#: ``pending``: waiting for its next attempt; ``running``: an attempt is claimed;
#: ``succeeded`` / ``failed`` / ``cancelled``: finished for good.
PENDING, RUNNING, SUCCEEDED, FAILED = "pending", "running", "succeeded", "failed"
CANCELLED = "cancelled"
FINISHED_STATES = (SUCCEEDED, FAILED, CANCELLED)
#: The claim token of a row that waits for a pause or a busy key: no publish of an earlier
#: message may mark it, and the end of the attempt holding its key wakes it.
WAITING_TOKEN = "waiting"
