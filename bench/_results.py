"""The figures a benchmark hands to ``run_all.py``: each with its peer, ratio and target.

A benchmark run with ``--json PATH`` writes its figures there; ``run_all.py`` collects them
into ``bench/RESULTS.md``. Figures are reported, never asserted: a missed target is a line in
the table, not a failed run.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass(frozen=True)
class Figure:
    """One measured figure beside its peer."""

    benchmark: str
    name: str
    value: float
    unit: str
    peer: str = ""
    peer_value: float | None = None
    #: How the ratio is formed, for example "asanoha / raw" or "10^6 / 10^4".
    ratio_label: str = ""
    ratio: float | None = None
    #: The target as text (">= 0.6", "<= 1.2"), with the bound it states.
    target: str = ""
    target_met: bool | None = None
    note: str = ""


def at_least(ratio: float | None, bound: float) -> bool | None:
    return None if ratio is None else ratio >= bound


def at_most(ratio: float | None, bound: float) -> bool | None:
    return None if ratio is None else ratio <= bound


def safe_ratio(top: float | None, bottom: float | None) -> float | None:
    if top is None or not bottom:
        return None
    return top / bottom


def write_figures(path: str | None, figures: Sequence[Figure]) -> None:
    """Write ``figures`` as JSON to ``path`` (nothing without a path)."""
    if path:
        Path(path).write_text(json.dumps([asdict(f) for f in figures], indent=1))


def read_figures(path: Path) -> list[Figure]:
    """The figures a benchmark wrote."""
    return [Figure(**found) for found in json.loads(path.read_text())]
