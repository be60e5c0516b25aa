"""``HttpParts``: what the HTTP layer reads of an application, named here so that
``platform/http`` takes parts and never imports the ``App`` that assembles them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from asanoha.platform.consumers import Consumers
from asanoha.platform.identity import TokenVerifier
from asanoha.platform.model import Registry
from asanoha.platform.service import Service
from asanoha.platform.settings import Settings
from asanoha.platform.store import Database


class HttpParts(Protocol):
    """The parts of an application the HTTP app is built from (``asanoha.App`` has them)."""

    settings: Settings
    registry: Registry
    database: Database
    service: Service
    consumers: Consumers

    @property
    def tokens(self) -> TokenVerifier:
        """The verifier of bearer tokens (own, the provider's, personal access tokens)."""
        ...

    def readiness_checks(self) -> dict[str, Callable[[], str]]:
        """What ``/health/ready`` asks: named checks that return ``"ok"`` or a short cause,
        and raise when they cannot reach what they check."""
        ...

    def job_health_checks(self) -> dict[str, Callable[[], str]]:
        """What ``/health/jobs`` asks, in the same form as ``readiness_checks``."""
        ...
