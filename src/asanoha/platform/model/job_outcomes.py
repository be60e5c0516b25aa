"""What a job may end with besides returning or failing: ``Snooze`` and ``JobCancelled``.

They live with the definitions, free of Celery, so that job code and ``import asanoha``
reach them without the workers.
"""

from __future__ import annotations

import math


class Snooze(Exception):
    """Run this job again after ``seconds``, without spending an attempt.

    A job returns or raises it: the attempt ends ``snoozed``, the row goes back to
    ``pending`` with ``not_before`` that far ahead, and the next delivery runs the same
    attempt again (``ctx.attempt`` unchanged, retries left unchanged).
    """

    def __init__(self, seconds: float) -> None:
        if (
            isinstance(seconds, bool)
            or not isinstance(seconds, int | float)
            or not math.isfinite(seconds)
            or seconds < 0
        ):
            raise ValueError(f"Snooze(seconds): a number of seconds >= 0, not {seconds!r}")
        super().__init__(f"snoozed for {seconds:g} s")
        self.seconds = float(seconds)


class JobCancelled(Exception):
    """The job was cancelled while it ran: raised by ``ctx.checkpoint()``.

    A job that ends with it ends ``cancelled``: no retry follows, and ``drain()`` does
    not report it as a failure.
    """
