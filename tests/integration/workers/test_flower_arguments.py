"""The arguments Flower shows are redacted for personal fields, on the first send and on retries."""

from __future__ import annotations

from typing import Any

from celery import signals

from asanoha.platform.model import Access, Backoff, Entity, Feature, SessionUser, fields

ADMIN = SessionUser.of("admin-1", "default", ["Admin"])

person = Entity(
    table="people",
    fields={
        "name": fields.text(personal="self"),
        "team": fields.text(personal=False, reason="an organisational unit"),
    },
)


def test_flower_sees_no_personal_values(jobs_stack):
    feature = Feature("crm")
    feature.crud("person", person, write=Access(roles=["Admin"]), read=Access(roles=["Admin"]))

    @feature.job("welcome", on="crm:write:person:create", retries=1, backoff=Backoff.fixed(0.01))
    def welcome(payload: dict[str, Any], ctx: Any) -> None:
        assert payload["name"] == "Ada Lovelace"  # the job itself sees the real value
        if ctx.attempt == 1:
            raise RuntimeError("retry once")

    shown: list[str] = []

    def capture(sender: Any = None, headers: Any = None, **_: Any) -> None:
        if sender == "crm:job:welcome":
            shown.append(headers["argsrepr"])

    signals.before_task_publish.connect(capture, weak=False)
    try:
        stack = jobs_stack([feature])
        stack.service.dispatch_write(
            "crm:write:person:create", {"name": "Ada Lovelace", "team": "engines"}, ADMIN
        )
        summary = stack.drain()
    finally:
        signals.before_task_publish.disconnect(capture)
    assert summary.retried == 1
    assert len(shown) == 2  # the first send and the retry
    for argsrepr in shown:
        assert "Ada" not in argsrepr
        assert "[redacted]" in argsrepr
        assert "engines" in argsrepr
