"""``GET /metrics``: writes by handler and outcome, denials by reason, outbox and consumer gauges."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from asanoha import Access, Entity, Feature, fields
from asanoha.platform.errors import NotFoundError
from asanoha.testing import Stack, TestUsers
from asanoha.testing.plugin import StackFactory

CREATE = "catalog:write:item:create"
memo = Entity(table="lagging_memos", fields={"text": fields.text(personal=False, reason="x")})


def scrape(stack: Stack) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = stack.http.client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def writes(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], **labels: str) -> float:
    key = ("asanoha_writes_total", tuple(sorted(labels.items())))
    return samples.get(key, 0.0)


def test_metrics_count_writes_by_handler_outcome_and_reason(stack: Stack) -> None:
    before = scrape(stack)
    stack.http.write_ok(CREATE, {"name": "lamp"}, TestUsers.admin)
    stack.http.write_err(CREATE, {"name": "lamp"}, TestUsers.user)
    with pytest.raises(NotFoundError):
        stack.service.dispatch_write("catalog:write:no-such-handler", {}, TestUsers.admin)
    after = scrape(stack)

    ok = {"handler": CREATE, "outcome": "ok", "reason": ""}
    denied = {"handler": CREATE, "outcome": "denied", "reason": "role_required"}
    unknown = {"handler": "(unknown)", "outcome": "rejected", "reason": "handler_not_found"}
    for labels in (ok, denied, unknown):
        assert writes(after, **labels) - writes(before, **labels) == 1, labels


def test_metrics_show_the_outbox_and_consumer_gauges(stack: Stack) -> None:
    samples = scrape(stack)
    assert samples[("asanoha_outbox_due_age_seconds", ())] == 0.0
    assert samples[("asanoha_outbox_due_rows", ())] == 0.0
    text = stack.http.client.get("/metrics").text
    assert "# TYPE asanoha_consumer_lag_events gauge" in text


def test_consumer_lag_counts_the_events_a_consumer_has_not_handled(
    asanoha_stack: StackFactory,
) -> None:
    feature = Feature("lagging")
    feature.crud("memo", memo, write=Access(roles=["Admin"]), read=Access(roles=["Admin"]))

    @feature.consumer("audit", on=["lagging:event:memo.created"])
    def audit(event: Any, ctx: Any) -> None:
        return None

    stack = asanoha_stack(features=[feature])
    stack.http.write_ok("lagging:write:memo:create", {"text": "a"}, TestUsers.admin)
    lag = (
        "asanoha_consumer_lag_events",
        (("consumer", "lagging:consumer:audit"), ("status", "idle")),
    )
    assert scrape(stack)[lag] == 1
    stack.drain()
    assert scrape(stack)[lag] == 0
