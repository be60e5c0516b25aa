"""Workflows: named steps, each a job, that run after the steps they come after.

``feature.workflow("onboard", on=... | manual=True)`` declares ``<feature>:workflow:onboard``;
each ``.step(name, after=..., map=...)`` declares the job ``<feature>:workflow:onboard:<name>``.
A step may only come after steps declared before it, so the steps are always in an order
that runs (no cycle can be written down). ``.sleep(name, after=, seconds=)`` is a step that
does nothing but wait: its row is written with ``not_before`` that far ahead.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from asanoha.platform.errors import DefinitionError
from asanoha.platform.model.backoff import Backoff
from asanoha.platform.model.handlers import JobDef
from asanoha.platform.model.names import check_segment, make_qn, to_kebab
from asanoha.platform.model.sync_callables import check_not_async

if TYPE_CHECKING:
    from asanoha.platform.model.feature import Feature

F = TypeVar("F", bound=Callable[..., Any])

#: The largest result a step may return, as JSON.
MAX_RESULT_BYTES = 1_000_000


class StepResultError(ValueError):
    """A step returned a result that cannot be stored: not JSON, or too large."""


class JobResultError(ValueError):
    """A ``keep_result=True`` job returned a result that cannot be stored: not JSON, or too
    large. The attempt fails with it (and is retried like any failure)."""


@dataclass(frozen=True)
class StepDef:
    """One step of a workflow: the job that runs it, what it comes after, and (``map``) the
    items it runs once for each."""

    workflow_qn: str
    name: str
    after: tuple[str, ...]
    #: ``map(ctx) -> list``: the step runs once per item, in parallel (``None``: once).
    map: Callable[[Any], Any] | None = None
    #: Seconds a sleep step waits (``None``: a step with a body).
    sleep: float | None = None

    @property
    def qn(self) -> str:
        """The step's job: ``<workflow qn>:<step>``."""
        return f"{self.workflow_qn}:{self.name}"


@dataclass
class WorkflowDef:
    """A declared workflow; its steps in declaration order."""

    qn: str
    feature: Feature
    on: str | None = None
    manual: bool = False
    steps: dict[str, StepDef] = field(default_factory=dict)

    def successors(self, step: str) -> tuple[StepDef, ...]:
        """The steps that come after ``step``."""
        return tuple(other for other in self.steps.values() if step in other.after)

    @property
    def first_steps(self) -> tuple[StepDef, ...]:
        """The steps with no ``after=``: they start with the run, on its payload."""
        return tuple(step for step in self.steps.values() if not step.after)

    def earlier(self, step: str) -> tuple[str, ...]:
        """Every step ``step`` comes after, directly or not (its ``ctx.results``)."""
        seen: list[str] = []
        todo = list(self.steps[step].after)
        while todo:
            name = todo.pop()
            if name not in seen:
                seen.append(name)
                todo.extend(self.steps[name].after)
        return tuple(seen)

    def step(
        self,
        name: str,
        *,
        after: str | Iterable[str] | None = None,
        map: Callable[[Any], Any] | None = None,
        retries: int = 0,
        backoff: Backoff | None = None,
        timeout: float | None = None,
        priority: int | None = None,
    ) -> Callable[[F], F]:
        """Declare the step ``name``: ``func(payload, ctx: StepContext)`` (a mapped step:
        ``func(item, ctx)``), whose return value is the step's result."""
        declared = self._declare(name, after, map)

        def register(func: F) -> F:
            check_not_async(
                func,
                declared.qn,
                "workflow step",
                "steps run in Celery worker threads and processes, not an event loop",
            )
            self._add(declared, func, retries, backoff, timeout, priority)
            return func

        return register

    def sleep(self, name: str, *, after: str | Iterable[str], seconds: float) -> StepDef:
        """Declare a step that waits ``seconds`` after the steps it comes after end."""
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
            raise DefinitionError(
                f"{self.qn}: step {name!r}: seconds must be a number >= 0, not {seconds!r}"
            )
        declared = self._declare(name, after, None, sleep=float(seconds))
        self._add(declared, _sleep_body, 0, None, None, None)
        return declared

    def _declare(
        self,
        name: str,
        after: str | Iterable[str] | None,
        mapper: Callable[[Any], Any] | None,
        *,
        sleep: float | None = None,
    ) -> StepDef:
        kebab = check_segment(to_kebab(name), f"{self.qn}: step name")
        if kebab in self.steps:
            raise DefinitionError(f"{self.qn}: step {kebab!r} is declared twice")
        names = (after,) if isinstance(after, str) else tuple(after or ())
        befores = tuple(to_kebab(before) for before in names)
        for before in befores:
            if before == kebab:
                raise DefinitionError(
                    f"{self.qn}: step {kebab!r} comes after itself (a cycle); a step comes "
                    "after steps declared before it"
                )
            if before not in self.steps:
                raise DefinitionError(
                    f"{self.qn}: step {kebab!r}: after={before!r} names no step declared "
                    f"before it (declared: {sorted(self.steps) or 'none'}); a step comes after "
                    "steps declared before it, so no cycle can be written down"
                )
        if mapper is not None and not befores:
            raise DefinitionError(
                f"{self.qn}: step {kebab!r}: map= needs after=; a first step has only the "
                "run's payload, no results to take the items from"
            )
        if mapper is not None and not callable(mapper):
            raise DefinitionError(f"{self.qn}: step {kebab!r}: map= must be a callable(ctx)")
        self.feature._check_open(f"workflow step {self.qn}:{kebab}")
        return StepDef(self.qn, kebab, befores, mapper, sleep)

    def _add(
        self,
        declared: StepDef,
        func: Callable[..., Any],
        retries: int,
        backoff: Backoff | None,
        timeout: float | None,
        priority: int | None,
    ) -> None:
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise DefinitionError(
                f"{declared.qn}: retries must be a whole number >= 0, not {retries!r}"
            )
        self.steps[declared.name] = declared
        mapped = declared.map is not None

        def run_step(payload: dict[str, Any], ctx: Any) -> Any:
            # A mapped step's row holds its item under "item" (an item need not be an object).
            return check_result(declared, func(payload["item"] if mapped else payload, ctx))

        run_step.__name__ = getattr(func, "__name__", declared.name)
        self.feature.jobs.append(
            JobDef(
                qn=declared.qn,
                feature=self.feature.name,
                func=run_step,
                retries=retries,
                backoff=backoff or Backoff.exponential(),
                timeout=timeout,
                priority=priority,
                description=f"step {declared.name!r} of {self.qn}",
                workflow_step=declared,
            )
        )


def check_result(step: StepDef, result: Any) -> Any:
    """``result`` if a step's result may be stored: JSON, at most ``MAX_RESULT_BYTES``."""
    problem = result_problem(f"step {step.qn}", result)
    if problem is not None:
        raise StepResultError(problem)
    return result


def result_problem(who: str, result: Any) -> str | None:
    """Why ``result`` may not be stored as the result of ``who`` (a step, a job that keeps
    its result): not JSON, or over ``MAX_RESULT_BYTES``; ``None``: it may."""
    try:
        text = json.dumps(result, allow_nan=False)
    except (TypeError, ValueError) as exc:
        return (
            f"{who} returned a result that is not JSON ({exc}); return dicts, lists, "
            "strings, numbers, booleans or None"
        )
    if len(text.encode()) > MAX_RESULT_BYTES:
        return (
            f"{who} returned a result of {len(text.encode())} bytes, over the limit of "
            f"{MAX_RESULT_BYTES}; store large data in an entity and return its id"
        )
    return None


def _sleep_body(payload: dict[str, Any], ctx: Any) -> None:
    """A sleep step: its row waited its time; nothing more to do."""


def declare_workflow(
    feature: Feature, name: str, on: str | None, manual: bool, cron: str | None
) -> WorkflowDef:
    """The workflow ``<feature>:workflow:<name>``, checked."""
    qn = make_qn(feature.name, "workflow", name)
    feature._check_open(f"workflow {qn!r}")
    if cron is not None:
        raise DefinitionError(f"{qn}: cron= is not supported for workflows; use on= or manual=True")
    if on is None and not manual:
        raise DefinitionError(f"{qn} has no trigger; pass on=... or manual=True")
    return WorkflowDef(qn, feature, on, manual)
