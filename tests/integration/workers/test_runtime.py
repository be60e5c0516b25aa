"""The in-process worker of a stack: one per process, its queues gone with it."""

from __future__ import annotations

from typing import Any

import pytest

from asanoha.platform.model import Feature


def _feature(name: str) -> Feature:
    feature = Feature(name)

    @feature.job("noop", manual=True)
    def noop(payload: dict[str, Any], ctx: Any) -> None:
        return None

    return feature


def test_a_second_stack_with_jobs_in_the_same_process_is_refused_clearly(jobs_stack):
    jobs_stack([_feature("first")])
    with pytest.raises(RuntimeError, match="another stack with jobs=True is running"):
        jobs_stack([_feature("second")])


def test_the_probe_counts_every_lane_queue(jobs_stack):
    stack = jobs_stack([_feature("lanes")])
    pending = stack.app.celery_jobs.probe().count(
        [f"{stack.app.settings.queue_prefix}.worker", f"{stack.app.settings.queue_prefix}.api"]
    )
    prefix = stack.app.settings.queue_prefix
    queued, reserved = pending
    assert queued == {f"{prefix}.worker": 0, f"{prefix}.api": 0}
    assert reserved == 0


def test_jobs_on_the_api_lane_run_too(jobs_stack):
    feature = Feature("lanes")
    seen: list[str] = []

    @feature.job("quick", manual=True, lane="api")
    def quick(payload: dict[str, Any], ctx: Any) -> None:
        seen.append(payload["note"])

    stack = jobs_stack([feature])
    stack.dispatch_job("lanes:job:quick", {"note": "on the api lane"})
    assert stack.drain().succeeded == 1
    assert seen == ["on the api lane"]


def test_a_closed_stack_gives_back_celerys_current_and_default_app(asanoha_stack):
    from celery import _state

    before = (_state.get_current_app(), _state.default_app)
    stack = asanoha_stack(features=[_feature("restore")], jobs=True)
    assert _state.get_current_app() is stack.app.celery
    stack.close()
    assert (_state.get_current_app(), _state.default_app) == before
