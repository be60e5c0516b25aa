"""Where a pass leaves the cursor when it stops at a failing event."""

from __future__ import annotations

import datetime as dt

from asanoha.platform.consumers import Gap
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
        gaps=(Gap(4, 99), Gap(13), Gap(16), Gap(19)),
    )
    assert scan.until(event(15)) == (14, (Gap(4, 99), Gap(13)))


def test_stopping_at_a_late_event_keeps_the_position_and_the_late_events_from_it_on():
    late = {5: Gap(5, 90), 7: Gap(7, None)}
    scan = Scan(
        start=10,
        events=[event(5), event(7), event(12)],
        position=12,
        gaps=(Gap(3, 80), Gap(11)),
        late=late,
    )
    assert scan.until(event(7)) == (10, (Gap(3, 80), Gap(7, None)))
    assert scan.until(event(5)) == (10, (Gap(3, 80), Gap(5, 90), Gap(7, None)))
