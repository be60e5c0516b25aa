"""Workflow declarations: names, steps as jobs, and the errors raised at import."""

from __future__ import annotations

from typing import Any

import pytest

from asanoha.platform.errors import DefinitionError
from asanoha.platform.model import Feature, Registry


def _onboard(feature: Feature) -> Any:
    onboard = feature.workflow("onboard", manual=True)

    @onboard.step("fetch", retries=2)
    def fetch(payload: dict[str, Any], ctx: Any) -> dict[str, Any]:
        return {}

    return onboard


def test_steps_are_jobs_named_under_the_workflow():
    crm = Feature("crm")
    onboard = _onboard(crm)

    @onboard.step("score", after="fetch", map=lambda ctx: ctx.results["fetch"]["accounts"])
    def score(item: dict[str, Any], ctx: Any) -> int:
        return 1

    @onboard.step("summarise", after="score")
    def summarise(payload: dict[str, Any], ctx: Any) -> None:
        return None

    onboard.sleep("cool-off", after="summarise", seconds=600)
    registry = Registry([crm])
    workflow = registry.workflow("crm:workflow:onboard")
    assert workflow is onboard
    assert [job.qn for job in registry.jobs] == [
        "crm:workflow:onboard:fetch",
        "crm:workflow:onboard:score",
        "crm:workflow:onboard:summarise",
        "crm:workflow:onboard:cool-off",
    ]
    fetch_job = registry.job("crm:workflow:onboard:fetch")
    assert fetch_job is not None and fetch_job.retries == 2
    assert [step.name for step in workflow.first_steps] == ["fetch"]
    assert [step.name for step in workflow.successors("score")] == ["summarise"]
    assert set(workflow.earlier("cool-off")) == {"fetch", "score", "summarise"}
    assert workflow.steps["cool-off"].sleep == 600.0


def test_an_unknown_after_names_the_workflow_and_the_step():
    onboard = _onboard(Feature("crm"))
    with pytest.raises(DefinitionError, match=r"crm:workflow:onboard: step 'score': after='nope'"):

        @onboard.step("score", after="nope")
        def score(payload: dict[str, Any], ctx: Any) -> None:
            return None


def test_a_step_after_itself_is_a_cycle():
    onboard = _onboard(Feature("crm"))
    with pytest.raises(DefinitionError, match=r"step 'score' comes after itself \(a cycle\)"):

        @onboard.step("score", after=["fetch", "score"])
        def score(payload: dict[str, Any], ctx: Any) -> None:
            return None


def test_map_on_a_first_step_is_refused():
    onboard = Feature("crm").workflow("onboard", manual=True)
    with pytest.raises(DefinitionError, match=r"crm:workflow:onboard: step 'fetch': map= needs"):

        @onboard.step("fetch", map=lambda ctx: [])
        def fetch(payload: dict[str, Any], ctx: Any) -> None:
            return None


def test_an_async_step_is_refused_naming_it():
    onboard = _onboard(Feature("crm"))
    with pytest.raises(DefinitionError, match=r"crm:workflow:onboard:score"):

        @onboard.step("score", after="fetch")
        async def score(payload: dict[str, Any], ctx: Any) -> None:
            return None


def test_a_step_declared_twice_is_refused():
    onboard = _onboard(Feature("crm"))
    with pytest.raises(DefinitionError, match=r"step 'fetch' is declared twice"):

        @onboard.step("fetch")
        def fetch(payload: dict[str, Any], ctx: Any) -> None:
            return None


def test_a_workflow_needs_a_trigger_and_a_known_handler():
    crm = Feature("crm")
    with pytest.raises(DefinitionError, match=r"crm:workflow:onboard has no trigger"):
        crm.workflow("onboard")
    onboard = crm.workflow("onboard", on="crm:write:customer:create")

    @onboard.step("fetch")
    def fetch(payload: dict[str, Any], ctx: Any) -> None:
        return None

    with pytest.raises(DefinitionError, match=r"on='crm:write:customer:create' names no"):
        Registry([crm])


def test_a_workflow_without_steps_is_refused():
    crm = Feature("crm")
    crm.workflow("onboard", manual=True)
    with pytest.raises(DefinitionError, match=r"crm:workflow:onboard declares no step"):
        Registry([crm])
