"""Where a pass leaves the cursor when it stops at a failing event; gaps as ranges."""

from __future__ import annotations

import datetime as dt

from asanoha.platform.consumers import Gap
from asanoha.platform.consumers.cursors import gaps_from_json, gaps_to_json
from asanoha.platform.consumers.visibility import Scan
from asanoha.platform.store import StoredEvent


def event(event_id: int) -> StoredEvent:
    return StoredEvent(
        id=event_id,
        stream_id="s",
        stream_type="t",
        tenant_id="a",
        version=1,
        type="f:event:e",
        schema_version=1,
        payload={},
        metadata={},
        created_at=dt.datetime.now(dt.UTC),
        created_by="u",
    )


def test_stopping_at_a_fresh_event_keeps_the_position_just_below_it_and_earlier_gaps():
    scan = Scan(
        start=10,
        events=[event(12), event(15), event(17)],
        position=20,
        gaps=(Gap(4, 6, 99), Gap(13, 14), Gap(16, 16), Gap(18, 19)),
    )
    assert scan.until(event(15)) == (14, (Gap(4, 6, 99), Gap(13, 14)))


def test_stopping_at_a_late_event_keeps_the_position_and_the_late_events_from_it_on():
    late: dict[int, int | None] = {5: 90, 7: None}
    scan = Scan(
        start=10,
        events=[event(5), event(7), event(12)],
        position=12,
        gaps=(Gap(3, 3, 80), Gap(6, 6, 90), Gap(11, 11)),
        late=late,
    )
    assert scan.until(event(7)) == (10, (Gap(3, 3, 80), Gap(6, 6, 90), Gap(7, 7, None)))
    assert scan.until(event(5)) == (
        10,
        (Gap(3, 3, 80), Gap(5, 5, 90), Gap(6, 6, 90), Gap(7, 7, None)),
    )


def test_a_range_without_some_ids_splits_around_them():
    gap = Gap(100, 50_099, 7)
    assert gap.size == 50_000
    assert gap.without([100, 30_000, 50_099]) == [Gap(101, 29_999, 7), Gap(30_001, 50_098, 7)]
    assert gap.without([]) == [gap]
    assert Gap(5, 5).without([5]) == []


def test_a_rollback_of_fifty_thousand_ids_is_stored_as_one_range():
    stored = gaps_to_json([Gap(100, 50_099, None)])
    assert stored == [[100, 50_099, None]]
    assert gaps_from_json(stored) == (Gap(100, 50_099, None),)


def test_gaps_stored_one_id_each_by_an_older_version_read_as_ranges_of_one():
    assert gaps_from_json([[4, 99], [13, None]]) == (Gap(4, 4, 99), Gap(13, 13, None))
