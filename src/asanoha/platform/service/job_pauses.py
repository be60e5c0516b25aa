"""Paused jobs and lanes: their rows stay pending, no claim takes them and the relay leaves
them alone, until they are resumed.

A pause is a row in ``asanoha_job_pauses`` whose target is a job QN or ``lane:<name>``; the
claim statements read it (see ``platform.jobs.guards.not_paused``), so a pause holds across the fleet at
once. A delivery that finds its job paused leaves the row waiting, unpublished; ``resume``
makes those rows due for the relay again, each no earlier than its ``not_before``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, delete, insert, select

from asanoha.platform.jobs import control
from asanoha.platform.jobs.clocks import now
from asanoha.platform.jobs.guards import LANE_PREFIX, lane_target
from asanoha.platform.model import Registry
from asanoha.platform.store import Tables

__all__ = [
    "LANE_PREFIX",
    "Pause",
    "lane_target",
    "lanes_of",
    "list_pauses",
    "pause",
    "paused_job_qns",
    "pausing_targets",
    "resolve_target",
    "resolve_targets",
    "resume",
]


@dataclass(frozen=True)
class Pause:
    """A paused job or lane."""

    target: str
    paused_at: dt.datetime
    paused_by: str | None


def resolve_target(registry: Registry, target: str) -> str:
    """The stored target for ``target``: a job QN, a lane name or ``lane:<name>``. Raises
    ``LookupError`` with a message naming what exists when it is neither."""
    lanes = sorted({job.lane for job in registry.jobs})
    name = target.removeprefix(LANE_PREFIX)
    if registry.job(target) is not None:
        return target
    if name in lanes or (target.startswith(LANE_PREFIX) and name in ("worker", "api")):
        return lane_target(name)
    raise LookupError(
        f"no job, workflow or lane {target!r}: name a job QN (asanoha jobs list), a "
        "workflow QN or a lane "
        f"({', '.join(lanes) or 'worker, api'})"
    )


def resolve_targets(registry: Registry, target: str) -> tuple[str, list[str]]:
    """What ``target`` names, and the stored targets it stands for: ``resolve_target``'s,
    or for a workflow's QN the QN of each of its steps (every step is a job): pausing a
    workflow pauses its steps."""
    workflow = registry.workflow(target)
    if workflow is not None:
        return workflow.qn, [step.qn for step in workflow.steps.values()]
    stored = resolve_target(registry, target)
    return stored, [stored]


def pause(conn: Connection, tables: Tables, target: str, by: str | None) -> bool:
    """Pause ``target`` (a stored target); return whether it was running until now."""
    pauses = tables.job_pauses
    exists = conn.execute(select(pauses.c.target).where(pauses.c.target == target)).first()
    if exists is not None:
        return False
    conn.execute(
        insert(pauses).values(target=target, paused_at=dt.datetime.now(dt.UTC), paused_by=by)
    )
    return True


def resume(conn: Connection, tables: Tables, registry: Registry, target: str) -> int:
    """Resume ``target``; make its waiting rows due for the relay: at once, or at their
    ``not_before`` for those whose time has not come (a debounce window, a long delay, a
    retry's backoff). Returns how many rows were waiting (0 when it was not paused)."""
    pauses = tables.job_pauses
    removed = conn.execute(delete(pauses).where(pauses.c.target == target)).rowcount
    if not removed:
        return 0
    lanes = lanes_of(registry)
    still = paused_job_qns(conn, tables, lanes)
    qns = [qn for qn in _jobs_of(lanes, target) if qn not in still]
    return control.resume_rows(conn, tables, qns, now())


def list_pauses(conn: Connection, tables: Tables) -> list[Pause]:
    """Every pause, oldest first."""
    pauses = tables.job_pauses
    rows = conn.execute(select(pauses).order_by(pauses.c.paused_at)).all()
    return [Pause(row.target, row.paused_at, row.paused_by) for row in rows]


def paused_job_qns(
    conn: Connection, tables: Tables, lanes: Mapping[str, Sequence[str]]
) -> frozenset[str]:
    """The QNs of the jobs paused by themselves or by their lane (``lanes``: lane -> the
    QNs of its jobs, see ``lanes_of``)."""
    return frozenset(pausing_targets(conn, tables, lanes))


def pausing_targets(
    conn: Connection, tables: Tables, lanes: Mapping[str, Sequence[str]]
) -> dict[str, str]:
    """Each paused job's QN -> the pause that holds it: the QN itself when the job is
    paused, else ``lane:<name>`` of its lane."""
    held: dict[str, str] = {}
    # Lanes first, so that a job paused by itself as well is shown as that.
    for target in sorted(
        (pause.target for pause in list_pauses(conn, tables)),
        key=lambda target: not target.startswith(LANE_PREFIX),
    ):
        for qn in _jobs_of(lanes, target):
            held[qn] = target
    return held


def lanes_of(registry: Registry) -> dict[str, tuple[str, ...]]:
    """Lane -> the QNs of its jobs."""
    lanes: dict[str, list[str]] = {}
    for job in registry.jobs:
        lanes.setdefault(job.lane, []).append(job.qn)
    return {lane: tuple(qns) for lane, qns in lanes.items()}


def _jobs_of(lanes: Mapping[str, Sequence[str]], target: str) -> Sequence[str]:
    if target.startswith(LANE_PREFIX):
        return lanes.get(target.removeprefix(LANE_PREFIX), ())
    return (target,)
