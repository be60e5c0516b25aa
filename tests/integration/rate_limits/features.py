"""Fixture feature for default rate limits: a handler that declares none, one deliberately
unlimited, one with a limit of its own."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from asanoha import Access, Feature, RateLimit

ADMIN = Access(roles=["Admin"])

defaults = Feature("defaults")


class Empty(BaseModel):
    pass


@defaults.query_handler("plain", access=ADMIN)
def plain(payload: Empty, ctx: Any) -> Any:
    return "ok"


@defaults.query_handler(
    "unlimited", access=ADMIN, rate_limit=None, reason="a health probe for load balancers"
)
def unlimited(payload: Empty, ctx: Any) -> Any:
    return "ok"


@defaults.query_handler("for-jobs", access=Access(roles=["Admin", "system"]))
def for_jobs(payload: Empty, ctx: Any) -> Any:
    return "ok"


@defaults.query_handler("own", access=ADMIN, rate_limit=RateLimit("3/minute"))
def own(payload: Empty, ctx: Any) -> Any:
    return "ok"


@defaults.query_handler(
    "public",
    access=Access(public="a status page anyone may read"),
    rate_limit=RateLimit("2/minute", per="ip"),
)
def public(payload: Empty, ctx: Any) -> Any:
    return "ok"
