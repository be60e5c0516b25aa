"""Retry countdowns, computed by the platform so they are deterministic (no jitter)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Backoff:
    """How long to wait before retry number ``attempt`` (1-based: the wait after attempt 1)."""

    kind: Literal["fixed", "exponential"]
    seconds: float
    max: float | None = None

    @classmethod
    def fixed(cls, seconds: float) -> Backoff:
        """The same delay before every retry."""
        if seconds < 0:
            raise ValueError("Backoff.fixed(seconds) needs seconds >= 0")
        return cls("fixed", float(seconds))

    @classmethod
    def exponential(cls, base: float = 1.0, max: float | None = None) -> Backoff:
        """``base * 2 ** (attempt - 1)``, capped at ``max`` when given."""
        if base < 0:
            raise ValueError("Backoff.exponential(base) needs base >= 0")
        return cls("exponential", float(base), max)

    def countdown(self, attempt: int) -> float:
        """Seconds to wait after the failed ``attempt`` before the next one."""
        if self.kind == "fixed":
            return self.seconds
        delay = self.seconds * 2.0 ** (attempt - 1)
        return min(delay, self.max) if self.max is not None else delay

    def longest(self, retries: int) -> float:
        """The longest countdown a job with ``retries`` retries can wait."""
        return max((self.countdown(a) for a in range(1, retries + 1)), default=0.0)
