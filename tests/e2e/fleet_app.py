"""The application of the operator fleet test (settings from ``ASANOHA_*``): a write that
triggers a job, a job that fails its first attempt, and a cron job."""

from __future__ import annotations

from typing import Any

from asanoha.app import App
from asanoha.platform.model import Access, Backoff, Entity, Feature, fields

feature = Feature("fleetops")
feature.crud(
    "order",
    Entity(table="fleetops_orders", fields={"n": fields.integer(required=True)}),
    write=Access(roles=["Admin"]),
    read=Access(roles=["Admin"]),
)


@feature.job("confirm", on="fleetops:write:order:create", timeout=20)
def confirm(payload: dict[str, Any], ctx: Any) -> None:
    """Succeeds on its first attempt."""


class FirstAttemptFails(Exception):
    """Raised on the first attempt of ``fleetops:job:flaky``."""


@feature.job(
    "flaky", on="fleetops:write:order:create", retries=1, backoff=Backoff.fixed(0.1), timeout=20
)
def flaky(payload: dict[str, Any], ctx: Any) -> None:
    """Fails its first attempt and succeeds on the retry."""
    if ctx.attempt == 1:
        raise FirstAttemptFails("the first attempt fails on purpose")


@feature.job("tick", cron="* * * * *", timeout=20)
def tick(payload: dict[str, Any], ctx: Any) -> None:
    """Runs every minute (and once at start when beat missed a run)."""


app = App([feature])
