"""``GET /metrics``: writes by handler and outcome, denials by reason, outbox and consumer gauges."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from asanoha.platform.errors import NotFoundError
from asanoha.testing import Stack, TestUsers

CREATE = "catalog:write:item:create"


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
