"""``StreamContext``: the second argument of a stream handler."""

from __future__ import annotations

from dataclasses import dataclass

from asanoha.platform.model import SessionUser


@dataclass(frozen=True)
class StreamContext:
    """Who follows the stream (the events a handler gets are already those this user may
    see, shaped for them)."""

    user: SessionUser

    @property
    def tenant_id(self) -> str:
        return self.user.tenant_id
