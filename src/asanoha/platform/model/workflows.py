"""Workflows: named steps, each a job, that run after the steps they come after.

``feature.workflow("onboard", on=... | manual=True)`` declares ``<feature>:workflow:onboard``;
each ``.step(name, after=..., map=...)`` declares the job ``<feature>:workflow:onboard:<name>``.
A step may only come after steps declared before it, so the steps are always in an order
that runs (no cycle can be written down). ``.sleep(name, after=, seconds=)`` is a step that
does nothing but wait: its row is written with ``not_before`` that far ahead.

``.wait(name, after=, event=, match=, timeout=)`` and ``.approval(name, after=)`` are held
steps: their row waits for something outside the run (the first matching event, a person's
approval), which ends it as succeeded; its ``not_before`` is the timeout, and a row that
reaches it runs the timeout's body (``held_body``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from asanoha.platform.errors import DefinitionError
from asanoha.platform.model.access import Access
from asanoha.platform.model.backoff import Backoff
from asanoha.platform.model.canvas import CANVAS_QN, CanvasStep
from asanoha.platform.model.cron import check_cron
from asanoha.platform.model.handlers import JobDef
from asanoha.platform.model.names import check_segment, make_qn, to_kebab
from asanoha.platform.model.sync_callables import check_not_async

if TYPE_CHECKING:
    from asanoha.platform.model.feature import Feature

F = TypeVar("F", bound=Callable[..., Any])

#: The last segment of the job that starts a ``cron=`` workflow's runs (no step takes it).
CRON_STEP = "cron"
#: The largest result a step may return, as JSON.
MAX_RESULT_BYTES = 1_000_000


class StepResultError(ValueError):
    """A step returned a result that cannot be stored: not JSON, or too large."""


class JobResultError(ValueError):
    """A ``keep_result=True`` job returned a result that cannot be stored: not JSON, or too
    large. The attempt fails with it (and is retried like any failure)."""


class StepTimeoutError(Exception):
    """A wait or an approval step reached its timeout: the step fails with it."""


#: What a held step does when its timeout comes: fail the step, or go on without it.
OnTimeout = Literal["fail", "continue"]
#: Seconds a held step without a timeout is held: a century, so its row is never due.
HELD_FOR_EVER = 100 * 365 * 86400.0


@dataclass(frozen=True)
class Hold:
    """What a held step waits for: ``kind`` ``wait`` (the first event of type ``event``
    whose ``match`` fields equal the run payload's) or ``approval`` (a person), at most
    ``timeout`` seconds (``None``: no limit)."""

    kind: Literal["wait", "approval"]
    timeout: float | None = None
    on_timeout: OnTimeout = "fail"
    #: A wait's event type.
    event: str | None = None
    #: A wait's pairs ``(event payload field, run payload field)`` that must be equal.
    match: tuple[tuple[str, str], ...] = ()
    #: Who may approve an approval step (``None``: whoever the entry admits).
    access: Access | None = None

    @property
    def held_for(self) -> float:
        """Seconds the step's row is held before its timeout's body runs."""
        return HELD_FOR_EVER if self.timeout is None else self.timeout

    def payload_key(self, payload: Mapping[str, Any]) -> str:
        """The key a run on ``payload`` waits under: SHA-256 of its matched values (the
        values themselves, which may be personal, are not stored)."""
        return _digest([payload.get(field) for _, field in self.match])

    def event_key(self, event_payload: Mapping[str, Any]) -> str | None:
        """The key of the waits an event with ``event_payload`` matches (``None``: it lacks
        a matched field, and matches none)."""
        if any(field not in event_payload for field, _ in self.match):
            return None
        return _digest([event_payload[field] for field, _ in self.match])


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
    #: A step of a canvas (``model/canvas``): the declared job it runs, and the payload its
    #: row starts from (``None``: a declared workflow's step, which is its own job).
    canvas: CanvasStep | None = None
    #: A held step (a wait, an approval): what ends it (``None``: its body does).
    hold: Hold | None = None

    @property
    def qn(self) -> str:
        """The step's job: ``<workflow qn>:<step>`` (a canvas step: the job it runs)."""
        if self.canvas is not None:
            return self.canvas.job_qn
        return f"{self.workflow_qn}:{self.name}"


@dataclass
class WorkflowDef:
    """A declared workflow; its steps in declaration order."""

    qn: str
    #: The declaring feature (``None``: a canvas, put together when it starts).
    feature: Feature | None
    on: str | None = None
    manual: bool = False
    #: A cron expression: each tick starts a run on an empty payload (``cron_job_qn``).
    cron: str | None = None
    steps: dict[str, StepDef] = field(default_factory=dict)

    @property
    def cron_job_qn(self) -> str:
        """The job that starts a run at each tick of ``cron``: ``<workflow qn>:cron``."""
        return f"{self.qn}:{CRON_STEP}"

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

    def wait(
        self,
        name: str,
        *,
        event: str,
        after: str | Iterable[str] | None = None,
        match: Mapping[str, str] | None = None,
        timeout: float | None = None,
        on_timeout: OnTimeout = "fail",
    ) -> StepDef:
        """Declare a step that waits for the first event of type ``event`` whose payload
        fields ``match`` (``{event field: run payload field}``) equal the run payload's,
        appended after the run started (also before the step was reached); its result is
        the event (``id``, ``type``, ``stream_id``, ``payload``). After ``timeout``
        seconds it fails (``on_timeout="continue"``: succeeds with ``None``)."""
        pairs = _match_pairs(self.qn, name, match)
        if not isinstance(event, str) or event.count(":") != 2:
            raise DefinitionError(
                f"{self.qn}: step {name!r}: event= names an event QN "
                f"('<feature>:event:<name>'), not {event!r}"
            )
        hold = Hold("wait", _timeout(self.qn, name, timeout), on_timeout, event, pairs)
        return self._held(name, after, hold)

    def approval(
        self,
        name: str,
        *,
        after: str | Iterable[str] | None = None,
        timeout: float | None = None,
        access: Access | None = None,
    ) -> StepDef:
        """Declare a step that waits for a person's approval (``app.workflows.approve``,
        ``workflow-admin:write:approve``): never an agent principal, once. ``access=``:
        who may approve (default: whoever reaches the entry). After ``timeout`` seconds
        the step fails."""
        if access is not None and not isinstance(access, Access):
            raise DefinitionError(f"{self.qn}: step {name!r}: access= takes an Access(...)")
        hold = Hold("approval", _timeout(self.qn, name, timeout), "fail", access=access)
        return self._held(name, after, hold)

    def _held(self, name: str, after: str | Iterable[str] | None, hold: Hold) -> StepDef:
        if hold.on_timeout not in ("fail", "continue"):
            raise DefinitionError(
                f"{self.qn}: step {name!r}: on_timeout= is 'fail' or 'continue', "
                f"not {hold.on_timeout!r}"
            )
        declared = dataclasses.replace(self._declare(name, after, None), hold=hold)
        self._add(declared, held_body(declared), 0, None, None, None)
        return declared

    @property
    def waits(self) -> tuple[StepDef, ...]:
        """The steps that wait for an event."""
        return tuple(step for step in self.steps.values() if step.hold and step.hold.kind == "wait")

    def _feature(self) -> Feature:
        if self.feature is None:
            raise DefinitionError(f"{self.qn}: a canvas takes no declared steps")
        return self.feature

    def _declare(
        self,
        name: str,
        after: str | Iterable[str] | None,
        mapper: Callable[[Any], Any] | None,
        *,
        sleep: float | None = None,
    ) -> StepDef:
        kebab = check_segment(to_kebab(name), f"{self.qn}: step name")
        if self.cron is not None and kebab == CRON_STEP:
            raise DefinitionError(
                f"{self.qn}: step {kebab!r}: the name is taken by the job that starts a run at "
                f"each tick of cron={self.cron!r} ({self.cron_job_qn}); name the step otherwise"
            )
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
        self._feature()._check_open(f"workflow step {self.qn}:{kebab}")
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
        feature = self._feature()

        def run_step(payload: dict[str, Any], ctx: Any) -> Any:
            # A mapped step's row holds its item under "item" (an item need not be an object).
            return check_result(declared, func(payload["item"] if mapped else payload, ctx))

        run_step.__name__ = getattr(func, "__name__", declared.name)
        feature.jobs.append(
            JobDef(
                qn=declared.qn,
                feature=feature.name,
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


def held_body(step: StepDef) -> Callable[[dict[str, Any], Any], Any]:
    """The body of a held step's row, which runs only when its timeout came (a match or an
    approval ends the row without running it)."""
    hold = step.hold
    assert hold is not None

    def timed_out(payload: dict[str, Any], ctx: Any) -> None:
        if hold.on_timeout == "continue":
            return None
        waited = "the event " + str(hold.event) if hold.kind == "wait" else "an approval"
        raise StepTimeoutError(
            f"step {step.name!r} of {step.workflow_qn} waited {hold.timeout:g} s for {waited}"
        )

    return timed_out


def _digest(values: list[Any]) -> str:
    text = json.dumps(values, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def _timeout(qn: str, name: str, timeout: float | None) -> float | None:
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise DefinitionError(
            f"{qn}: step {name!r}: timeout must be a number of seconds > 0, not {timeout!r}"
        )
    return float(timeout)


def _match_pairs(
    qn: str, name: str, match: Mapping[str, str] | None
) -> tuple[tuple[str, str], ...]:
    if match is None:
        return ()
    if not isinstance(match, Mapping) or not all(
        isinstance(key, str) and key and isinstance(value, str) and value
        for key, value in match.items()
    ):
        raise DefinitionError(
            f"{qn}: step {name!r}: match= maps event payload fields to run payload fields "
            f"({{'order_id': 'order_id'}}), not {match!r}"
        )
    return tuple(sorted(match.items()))


def declare_workflow(
    feature: Feature,
    name: str,
    on: str | None,
    manual: bool,
    cron: str | None,
    per_tenant: bool = False,
) -> WorkflowDef:
    """The workflow ``<feature>:workflow:<name>``, checked; a ``cron=`` workflow with the job
    that starts its runs (``cron_job``)."""
    qn = make_qn(feature.name, "workflow", name)
    feature._check_open(f"workflow {qn!r}")
    if on is None and not manual and cron is None:
        raise DefinitionError(f"{qn} has no trigger; pass on=..., cron=... or manual=True")
    if per_tenant and cron is None:
        raise DefinitionError(f"{qn}: per_tenant=True applies to cron ticks; pass cron=...")
    if cron is not None:
        check_cron(cron, qn)
    workflow = WorkflowDef(qn, feature, on, manual, cron)
    if cron is not None:
        feature.jobs.append(cron_job(workflow, per_tenant=per_tenant))
    return workflow


def cron_job(workflow: WorkflowDef, *, per_tenant: bool) -> JobDef:
    """The job a ``cron=`` workflow's ticks run: it starts a run on an empty payload, in its
    own transaction, so a tick starts one run however often its message is delivered (the
    job row's claim runs it once)."""
    assert workflow.cron is not None and workflow.feature is not None

    def start_run(payload: dict[str, Any], ctx: Any) -> None:
        ctx.start_workflow(workflow.qn, {})

    start_run.__name__ = f"start_{workflow.qn.rsplit(':', 1)[-1].replace('-', '_')}"
    return JobDef(
        qn=workflow.cron_job_qn,
        feature=workflow.feature.name,
        func=start_run,
        cron=workflow.cron,
        per_tenant=per_tenant,
        description=f"starts a run of {workflow.qn} at each tick of {workflow.cron!r}",
    )


def canvas_workflow(steps: Iterable[CanvasStep]) -> WorkflowDef:
    """The workflow a canvas runs as: a step per job, in the canvas's order."""
    workflow = WorkflowDef(CANVAS_QN, None, manual=True)
    for step in steps:
        workflow.steps[step.name] = StepDef(CANVAS_QN, step.name, step.after, canvas=step)
    return workflow


def stored_canvas(workflow: WorkflowDef) -> dict[str, Any]:
    """What a canvas run keeps as its payload: its steps (``canvas_of_run`` reads it back)."""
    return {"canvas": [step.canvas.to_json() for step in workflow.steps.values() if step.canvas]}


def canvas_of_run(payload: Any) -> WorkflowDef:
    """The workflow of a canvas run, from its (revealed) payload."""
    return canvas_workflow(CanvasStep.from_json(step) for step in payload["canvas"])
