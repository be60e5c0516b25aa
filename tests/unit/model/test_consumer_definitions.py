"""``feature.consumer``: what is refused at definition time, and the job-trigger consumer."""

from __future__ import annotations

from typing import Any

import pytest

from asanoha import Backoff, DefinitionError, Feature, Registry
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
        (
            {"on": ["shop:event:a"], "backoff": 5},
            r"shop:consumer:mailer: backoff must be Backoff.fixed\(...\) or Backoff.exponential",
        ),
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


def test_a_consumer_waits_between_attempts_by_default_and_takes_a_declared_backoff():
    feature = Feature("shop")
    feature.event("paid")
    feature.consumer("audit", on=["shop:event:paid"])(_noop)
    feature.consumer("mailer", on=["shop:event:paid"], backoff=Backoff.fixed(10))(_noop)
    audit, mailer = Registry([feature]).consumers
    # 2, 4, 8, 16 s: the default five attempts span about half a minute.
    assert [audit.backoff.countdown(n) for n in range(1, 5)] == [2.0, 4.0, 8.0, 16.0]
    assert audit.backoff.countdown(20) == 300.0
    assert mailer.backoff == Backoff.fixed(10)
