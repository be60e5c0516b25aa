"""The application of the concurrency fleet test (settings from ``ASANOHA_*``): one job per
concurrency mode, each recording the start and end of its attempt as a ``conc:span`` row
(wall-clock seconds, comparable between the worker processes and the test)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from asanoha.app import App
from asanoha.platform.model import Access, Concurrency, Entity, Feature, fields

feature = Feature("conc")
feature.crud(
    "span",
    Entity(
        table="conc_spans",
        fields={
            "job": fields.text(required=True, personal=False, reason="a job name"),
            "key": fields.text(personal=False, reason="a test key"),
            "n": fields.integer(),
            "tenant": fields.text(personal=False, reason="a tenant id"),
            "started": fields.number(required=True),
            "ended": fields.number(required=True),
            "pid": fields.integer(),
        },
    ),
    write=Access(roles=["system", "Admin"]),
    read=Access(roles=["system", "Admin"]),
)

#: Seconds a job waits at most for its gate file or its cancel request.
HOLD_LIMIT = 15.0


def _record(job: str, payload: dict[str, Any], ctx: Any, started: float) -> None:
    ctx.write(
        "conc:write:span:create",
        {
            "job": job,
            "key": payload.get("key"),
            "n": payload.get("n"),
            "tenant": ctx.tenant_id,
            "started": started,
            "ended": time.time(),
            "pid": os.getpid(),
        },
    )


def _wait_for(gate: str) -> None:
    deadline = time.monotonic() + HOLD_LIMIT
    while not Path(gate).exists() and time.monotonic() < deadline:
        time.sleep(0.02)


@feature.job("skip", manual=True, concurrency=Concurrency.skip(key=["key"]), timeout=20)
def skip(payload: dict[str, Any], ctx: Any) -> None:
    """Holds until the file ``payload["gate"]`` exists, so every enqueue of its key meets
    this row pending or running."""
    started = time.time()
    _wait_for(payload["gate"])
    _record("skip", payload, ctx, started)


@feature.job("replace", manual=True, concurrency=Concurrency.replace(), timeout=20)
def replace(payload: dict[str, Any], ctx: Any) -> None:
    """``hold``: runs until asked to stop (a later enqueue replaces it); else a short run."""
    started = time.time()
    if payload.get("hold"):
        deadline = time.monotonic() + HOLD_LIMIT
        while not ctx.cancel_requested and time.monotonic() < deadline:
            time.sleep(0.02)
    else:
        time.sleep(0.1)
    _record("replace", payload, ctx, started)


@feature.job("sequential", manual=True, concurrency=Concurrency.sequential(key=["key"]), timeout=20)
def sequential(payload: dict[str, Any], ctx: Any) -> None:
    """A short run; one per key at a time."""
    started = time.time()
    time.sleep(0.1)
    _record("sequential", payload, ctx, started)


@feature.job("quota", manual=True, max_per_tenant=2, timeout=20)
def quota(payload: dict[str, Any], ctx: Any) -> None:
    """A short run (held until the file ``payload["gate"]`` exists, when given); at most
    two per tenant at a time."""
    started = time.time()
    if payload.get("gate"):
        _wait_for(payload["gate"])
    time.sleep(0.2)
    _record("quota", payload, ctx, started)


@feature.job("debounce", manual=True, concurrency=Concurrency.debounce(1.0, key=["key"]))
def debounce(payload: dict[str, Any], ctx: Any) -> None:
    """Runs once a second after the last enqueue of its key."""
    _record("debounce", payload, ctx, time.time())


@feature.job("pausable", manual=True, timeout=20)
def pausable(payload: dict[str, Any], ctx: Any) -> None:
    """A plain job, paused and resumed by the test."""
    started = time.time()
    time.sleep(0.05)
    _record("pausable", payload, ctx, started)


app = App([feature])
