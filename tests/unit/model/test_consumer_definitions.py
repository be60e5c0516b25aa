"""``feature.consumer``: what is refused at definition time, and the job-trigger consumer."""

from __future__ import annotations

from typing import Any

import pytest

from asanoha import DefinitionError, Feature, Registry
from asanoha.platform.consumers import JOB_TRIGGER_CONSUMER, consumer_definitions


def _noop(event: Any, ctx: Any) -> None:
    return None


def test_a_consumer_of_an_undeclared_event_fails_when_the_registry_is_built():
    feature = Feature("shop")
    feature.consumer("mailer", on=["shop:event:nope"])(_noop)
    with pytest.raises(DefinitionError, match=r"shop:consumer:mailer.*'shop:event:nope'"):
        Registry([feature])


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"on": []}, "at least one event type"),
        ({"on": ["shop:event:a", "shop:event:a"]}, "names an event type twice"),
        ({"on": ["shop:event:a"], "max_attempts": 0}, "max_attempts must be >= 1"),
        ({"on": ["shop:event:a"], "start": "yesterday"}, "start must be 'beginning' or 'now'"),
    ],
)
def test_bad_consumer_options_are_refused(options: dict[str, Any], message: str):
    with pytest.raises(DefinitionError, match=message):
        Feature("shop").consumer("mailer", **options)(_noop)


def test_an_async_consumer_is_refused():
    async def handler(event: Any, ctx: Any) -> None:
        return None

    with pytest.raises(DefinitionError, match="not async def"):
        Feature("shop").consumer("mailer", on=["shop:event:a"])(handler)


def test_entity_and_domain_events_can_be_followed_and_event_jobs_get_the_trigger_consumer():
    from asanoha import Entity, fields

    feature = Feature("shop")
    feature.entity("order", Entity(table="orders", fields={"n": fields.integer()}))
    paid = feature.event("paid")
    feature.consumer("audit", on=["shop:event:order.created", paid.qn], start="now")(_noop)
    feature.job("receipt", on=paid.qn)(lambda payload, ctx: None)
    registry = Registry([feature])
    audit, trigger = consumer_definitions(registry)
    assert (audit.qn, audit.on, audit.start) == (
        "shop:consumer:audit",
        ("shop:event:order.created", "shop:event:paid"),
        "now",
    )
    assert (trigger.qn, trigger.on, trigger.start) == (JOB_TRIGGER_CONSUMER, (paid.qn,), "now")
