"""``asanoha events prune --older-than``: ages in days, hours or minutes."""

from __future__ import annotations

import datetime as dt

import pytest
import typer

from asanoha.cli.events import parse_age


def test_events_prune_reads_ages_in_days_hours_and_minutes() -> None:
    assert parse_age("365d") == dt.timedelta(days=365)
    assert parse_age("12h") == dt.timedelta(hours=12)
    assert parse_age("30m") == dt.timedelta(minutes=30)
    for wrong in ("0d", "1y", "d", "-3d"):
        with pytest.raises(typer.BadParameter, match="is no age"):
            parse_age(wrong)
