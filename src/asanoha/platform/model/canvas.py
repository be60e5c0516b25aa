"""Ad-hoc workflows over declared jobs, in Celery's canvas vocabulary: ``job``, ``chain``,
``group`` and ``chord``.

``ctx.start_workflow(chain(job("shop:job:pick", {"order": 7}), job("shop:job:ship")))`` starts
a run of the same kind as a declared workflow's (``asanoha:workflow:canvas``): each job is a
step with a job row of its own, a step becomes due when the steps it comes after succeeded,
and the barrier of a chord is the same guarded counter. The shape is stored with the run
(sealed, like a payload), so the run is driven and retried without the code that built it.

What a step receives: the payload given to ``job(...)`` (``{}`` when none), and, for a step
that comes after others, the key ``"results"`` added to it: the results of the steps it comes
after, in order (one for a link of a chain, one per member for a chord's body). A job's return
value is its step's result (JSON, as for declared steps).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Union

from asanoha.platform.model.names import make_qn

#: The workflow every ad-hoc run belongs to.
CANVAS_QN = make_qn("asanoha", "workflow", "canvas")
#: The key a step that comes after others finds their results under.
RESULTS_KEY = "results"


class CanvasError(ValueError):
    """A canvas that cannot run: an empty chain or group, a job that is not declared, a
    payload that is not an object or already holds ``"results"``."""


@dataclass(frozen=True)
class Job:
    """One declared job in a canvas, with the payload its step starts from."""

    qn: str
    payload: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Chain:
    """Parts that run one after the other; each gets the results of the one before."""

    parts: tuple[Canvas, ...]


@dataclass(frozen=True)
class Group:
    """Parts that run side by side."""

    parts: tuple[Canvas, ...]


@dataclass(frozen=True)
class Chord:
    """A group, then ``body`` once every member of the group succeeded, with their results
    in the group's order."""

    header: Group
    body: Canvas


Canvas = Union[Job, Chain, Group, Chord]  # noqa: UP007 (a runtime alias isinstance accepts)


def job(qn: str, payload: Mapping[str, Any] | None = None) -> Job:
    """The declared job ``qn`` as a step of a canvas, starting from ``payload``."""
    if not isinstance(qn, str) or not qn:
        raise CanvasError(f"job(...) takes a job's qualified name, not {qn!r}")
    if payload is not None and not isinstance(payload, Mapping):
        raise CanvasError(f"{qn}: job(...)'s payload must be a dict, not {type(payload).__name__}")
    body = dict(payload or {})
    if RESULTS_KEY in body:
        raise CanvasError(
            f"{qn}: the payload key {RESULTS_KEY!r} is the platform's: a step finds the "
            "results of the steps it comes after there"
        )
    return Job(qn, body)


def chain(*parts: Canvas | Iterable[Canvas]) -> Chain:
    """``parts`` one after the other (``chain(a, b, c)`` or ``chain([a, b, c])``)."""
    return Chain(_parts("chain", parts))


def group(*parts: Canvas | Iterable[Canvas]) -> Group:
    """``parts`` side by side (``group(a, b)`` or ``group(jobs)``)."""
    return Group(_parts("group", parts))


def chord(header: Group | Iterable[Canvas], body: Canvas) -> Chord:
    """``header`` (a group, or its parts), then ``body`` with every result of it."""
    members = header if isinstance(header, Group) else group(*header)
    if not _is_canvas(body):
        raise CanvasError(f"chord(...)'s body must be a job, chain, group or chord, not {body!r}")
    return Chord(members, body)


@dataclass(frozen=True)
class CanvasStep:
    """A step of a compiled canvas: its name in the run, its job, the steps it comes after
    (in the order their results are given) and its own payload."""

    name: str
    job_qn: str
    after: tuple[str, ...]
    payload: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        """As stored with the run."""
        return {
            "name": self.name,
            "job": self.job_qn,
            "after": list(self.after),
            "payload": self.payload,
        }

    @classmethod
    def from_json(cls, stored: Mapping[str, Any]) -> CanvasStep:
        """As read back from the run."""
        return cls(
            str(stored["name"]),
            str(stored["job"]),
            tuple(str(name) for name in stored["after"]),
            dict(stored["payload"]),
        )


def compile_canvas(canvas: Canvas, check_job: Callable[[str], None]) -> tuple[CanvasStep, ...]:
    """The steps of ``canvas`` in an order that runs; ``check_job(qn)`` raises for a job
    that may not be a step (not declared)."""
    if not _is_canvas(canvas):
        raise CanvasError(
            f"start a workflow's qualified name or a canvas (job, chain, group, chord), "
            f"not {canvas!r}"
        )
    steps: list[CanvasStep] = []

    def place(node: Canvas, after: tuple[str, ...]) -> tuple[str, ...]:
        if isinstance(node, Job):
            check_job(node.qn)
            name = f"s{len(steps) + 1}-{node.qn.rsplit(':', 1)[-1].replace('.', '-')}"
            steps.append(CanvasStep(name, node.qn, after, node.payload))
            return (name,)
        if isinstance(node, Chain):
            ends = after
            for part in node.parts:
                ends = place(part, ends)
            return ends
        if isinstance(node, Group):
            return tuple(name for part in node.parts for name in place(part, after))
        return place(node.body, place(node.header, after))

    place(canvas, ())
    return tuple(steps)


def step_payload(step: CanvasStep, results: list[Any]) -> dict[str, Any]:
    """What the job row of ``step`` runs on: its payload, plus the ``results`` of the steps
    it comes after when it comes after any."""
    if not step.after:
        return dict(step.payload)
    return {**step.payload, RESULTS_KEY: results}


def _parts(kind: str, given: tuple[Canvas | Iterable[Canvas], ...]) -> tuple[Canvas, ...]:
    if len(given) == 1 and not _is_canvas(given[0]) and isinstance(given[0], Iterable):
        given = tuple(given[0])
    for part in given:
        if not _is_canvas(part):
            raise CanvasError(f"{kind}(...) takes jobs, chains, groups or chords, not {part!r}")
    if not given:
        raise CanvasError(f"{kind}(...) needs at least one part")
    return tuple(given)  # type: ignore[arg-type]


def _is_canvas(value: Any) -> bool:
    return isinstance(value, Job | Chain | Group | Chord)
