"""The Jobs page's pause table: every lane and every job the application declares, paused or
not, from ``job-admin:query:pauses``.

A job is held by its own pause or by its lane's; the handler says which (the rule lives in
``platform.service.job_pauses``), so the page never works it out from the lanes itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from asanoha.platform.model import Registry

#: How a lane's pause target is spelled (``job_pauses.LANE_PREFIX``).
LANE_PREFIX = "lane:"


@dataclass(frozen=True)
class PauseRow:
    """A lane or a job: what pausing it takes, and whether a pause holds it."""

    #: What ``job-admin:write:pause`` / ``resume`` take: a job QN or ``lane:<name>``.
    target: str
    kind: Literal["lane", "job"]
    #: The lane a job runs on (a lane's own name for a lane).
    lane: str
    #: The pause that holds it: its own target, its lane's, or ``None``: it runs.
    held_by: str | None
    #: When its own pause began and who began it (``None`` unless paused by itself).
    paused_at: str | None = None
    paused_by: str | None = None

    @property
    def paused(self) -> bool:
        """Whether a pause holds it (its own or its lane's)."""
        return self.held_by is not None

    @property
    def paused_itself(self) -> bool:
        """Whether it is paused by itself: resuming it is what lets it run again."""
        return self.held_by == self.target


def pause_rows(registry: Registry, answer: Mapping[str, Any] | None) -> list[PauseRow]:
    """The lanes, then the jobs, of ``registry``, with the pauses ``answer`` (the data of
    ``job-admin:query:pauses``; ``None``: unknown, shown as running) reports."""
    pauses: Sequence[Mapping[str, Any]] = answer["pauses"] if answer else ()
    held: Mapping[str, str] = answer["held"] if answer else {}
    own = {pause["target"]: pause for pause in pauses}
    lanes = sorted({job.lane for job in registry.jobs})
    rows = [_row(f"{LANE_PREFIX}{lane}", "lane", lane, own) for lane in lanes]
    for job in sorted(registry.jobs, key=lambda job: job.qn):
        row = _row(job.qn, "job", job.lane, own)
        if row.held_by is None and job.qn in held:
            row = PauseRow(job.qn, "job", job.lane, held[job.qn])
        rows.append(row)
    return rows


def _row(
    target: str, kind: Literal["lane", "job"], lane: str, own: Mapping[str, Mapping[str, Any]]
) -> PauseRow:
    pause = own.get(target)
    if pause is None:
        return PauseRow(target, kind, lane, None)
    return PauseRow(target, kind, lane, target, pause.get("paused_at"), pause.get("paused_by"))
