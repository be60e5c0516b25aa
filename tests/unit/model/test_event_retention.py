"""``feature.event(..., keep_for=...)``: an age in days, hours or minutes."""

from __future__ import annotations

import datetime as dt

import pytest

from asanoha import DefinitionError, Feature


def test_keep_for_is_read_as_an_age() -> None:
    shop = Feature("shop")
    assert shop.event("placed", keep_for="365d").keep_for == dt.timedelta(days=365)
    assert shop.event("viewed", keep_for=dt.timedelta(hours=2)).keep_for == dt.timedelta(hours=2)
    assert shop.event("kept").keep_for is None


@pytest.mark.parametrize("wrong", ["1y", "0d", "soon", dt.timedelta(0)])
def test_a_wrong_keep_for_fails_naming_the_event(wrong: object) -> None:
    with pytest.raises(DefinitionError, match=r"event 'shop:event:placed': keep_for .* is no age"):
        Feature("shop").event("placed", keep_for=wrong)  # type: ignore[arg-type]
