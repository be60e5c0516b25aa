"""The geometry of the console's inline SVG charts (the templates draw them): no script and
no chart library, so the pages need nothing but the server."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

#: The drawing area of a chart, in SVG user units.
WIDTH, HEIGHT = 600, 120


@dataclass(frozen=True)
class Bar:
    """One rectangle of a chart, with the tooltip the page shows for it."""

    x: float
    y: float
    width: float
    height: float
    kind: str
    title: str


@dataclass(frozen=True)
class Chart:
    """The bars of a chart, its height and the largest value it shows."""

    bars: list[Bar]
    width: int
    height: int
    peak: int


def throughput_chart(minutes: Sequence[dict[str, Any]]) -> Chart:
    """A stacked bar per minute: succeeded attempts below, failed ones on top."""
    peak = max((slot["succeeded"] + slot["failed"] for slot in minutes), default=0)
    scale = HEIGHT / peak if peak else 0.0
    step = WIDTH / max(len(minutes), 1)
    bars: list[Bar] = []
    for index, slot in enumerate(minutes):
        x = index * step
        label = str(slot["minute"])[11:16]
        ok_height = slot["succeeded"] * scale
        failed_height = slot["failed"] * scale
        if slot["succeeded"]:
            bars.append(
                Bar(
                    x,
                    HEIGHT - ok_height,
                    step * 0.8,
                    ok_height,
                    "succeeded",
                    f"{label}: {slot['succeeded']} succeeded",
                )
            )
        if slot["failed"]:
            bars.append(
                Bar(
                    x,
                    HEIGHT - ok_height - failed_height,
                    step * 0.8,
                    failed_height,
                    "failed",
                    f"{label}: {slot['failed']} failed",
                )
            )
    return Chart(bars, WIDTH, HEIGHT, peak)


#: The height of one consumer's bar in the lag chart.
ROW_HEIGHT = 22


def lag_chart(consumers: Sequence[dict[str, Any]]) -> Chart:
    """A horizontal bar per consumer: how many events it is behind."""
    peak = max((consumer["lag"] for consumer in consumers), default=0)
    scale = (WIDTH - 10) / peak if peak else 0.0
    bars = [
        Bar(
            0,
            index * ROW_HEIGHT + 3,
            max(consumer["lag"] * scale, 1.0),
            ROW_HEIGHT - 6,
            consumer["status"],
            f"{consumer['name']}: {consumer['lag']} behind",
        )
        for index, consumer in enumerate(consumers)
    ]
    return Chart(bars, WIDTH, max(len(consumers), 1) * ROW_HEIGHT, peak)
