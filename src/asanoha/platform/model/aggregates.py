"""Aggregates: state folded from a stream's events (``@feature.aggregate("order")``).

Two forms, both declared with ``feature.aggregate``:

- a class whose instances are the state. ``Order()`` (no arguments) is the state before the
  first event; a method ``apply_<event>`` is called with each event of that type, where
  ``<event>`` is the event's name with ``-`` and ``.`` written ``_`` (``orders:event:placed``
  -> ``apply_placed``, ``orders:event:order.created`` -> ``apply_order_created``); a method
  ``apply(event)``, when declared, gets every event no ``apply_<event>`` method takes. Events
  nothing takes leave the state as it is. The state is the instance's attributes, which must
  be JSON values for a snapshot to hold them.
- a fold function ``fold(state, event) -> state`` whose state is a JSON value, ``None``
  before the first event.

Which event each ``apply_<event>`` method names is resolved when the registry is built (an
event may be declared after the aggregate); everything else is checked here, at import.
"""

from __future__ import annotations

import hashlib
import inspect
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from asanoha.platform.errors import DefinitionError

AggregateForm = Literal["class", "fold"]
_APPLY_PREFIX = "apply_"
_METHOD_RE = re.compile(r"^apply_[a-z][a-z0-9_]*$")


@dataclass(frozen=True)
class AggregateDef:
    """An aggregate declared in a feature: how its state is folded from events."""

    feature: str
    name: str
    #: The class (form ``class``) or the fold function (form ``fold``).
    target: Any
    form: AggregateForm
    #: ``apply_<event>`` method names of a class (resolved to event types by the registry).
    appliers: tuple[str, ...] = ()
    #: Whether a class declares ``apply(event)`` for the events no ``apply_<event>`` takes.
    has_apply: bool = False
    #: Take a snapshot after this many events past the last one (``None``: never).
    snapshot_every: int | None = None
    #: The shape of the state: a snapshot of another version is ignored and taken again.
    version: str = ""
    #: Event type -> the method (or ``apply``) that folds it; filled by the registry.
    handlers: Mapping[str, str] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """``feature:name``: how ``ctx.load`` and the snapshot rows name the aggregate."""
        return f"{self.feature}:{self.name}"

    def initial(self) -> Any:
        """The state before the first event."""
        return self.target() if self.form == "class" else None

    def fold(self, state: Any, event: Any) -> Any:
        """``state`` after ``event`` (a class's state is changed in place and returned)."""
        if self.form == "fold":
            return self.target(state, event)
        method = self.handlers.get(event.type)
        if method is None:
            method = "apply" if self.has_apply else None
        if method is not None:
            getattr(state, method)(event)
        return state


def method_event_name(method: str) -> str:
    """``apply_order_created`` -> ``order_created``: what an event's name must read as."""
    return method[len(_APPLY_PREFIX) :]


def event_method_name(event_name: str) -> str:
    """An event's name (the part after ``:event:``) as an ``apply_<event>`` method suffix."""
    return event_name.replace("-", "_").replace(".", "_").replace(":", "_")


def define_aggregate(
    feature: str,
    name: str,
    target: Any,
    *,
    snapshot_every: int | None,
    version: int | str | None,
) -> AggregateDef:
    """Check a declaration and build its definition; ``DefinitionError`` naming the feature
    and aggregate otherwise."""
    where = f"aggregate {name!r} of feature {feature!r}"
    if snapshot_every is not None and (
        isinstance(snapshot_every, bool)
        or not isinstance(snapshot_every, int)
        or snapshot_every < 1
    ):
        raise DefinitionError(
            f"{where}: snapshot_every must be an int >= 1, not {snapshot_every!r}"
        )
    if version is not None and (
        isinstance(version, bool) or not isinstance(version, int | str) or version == ""
    ):
        raise DefinitionError(f"{where}: version must be an int or a non-empty str")
    if inspect.isclass(target):
        return _define_class(feature, name, target, where, snapshot_every, version)
    if inspect.iscoroutinefunction(target):
        raise DefinitionError(f"{where}: a fold function is called in a transaction; not async")
    if inspect.isfunction(target):
        try:
            inspect.signature(target).bind(None, None)
        except TypeError as exc:
            raise DefinitionError(
                f"{where}: a fold function takes (state, event) and returns the new state"
            ) from exc
        return AggregateDef(
            feature=feature,
            name=name,
            target=target,
            form="fold",
            snapshot_every=snapshot_every,
            version=_version(target, version),
        )
    raise DefinitionError(
        f"{where}: decorate a class with apply_<event> methods or a fold(state, event) "
        f"function, not {type(target).__name__}"
    )


def _define_class(
    feature: str,
    name: str,
    cls: type[Any],
    where: str,
    snapshot_every: int | None,
    version: int | str | None,
) -> AggregateDef:
    try:
        inspect.signature(cls).bind()
    except (TypeError, ValueError) as exc:
        raise DefinitionError(
            f"{where}: {cls.__name__}() must be callable without arguments (its state before "
            "the first event); give every attribute a default"
        ) from exc
    appliers = []
    for attr in dir(cls):
        if not attr.startswith(_APPLY_PREFIX):
            continue
        if not _METHOD_RE.match(attr) or not callable(getattr(cls, attr)):
            raise DefinitionError(
                f"{where}: {cls.__name__}.{attr} is not an apply_<event> method (lower-case "
                "snake_case after apply_)"
            )
        appliers.append(attr)
    has_apply = callable(getattr(cls, "apply", None))
    if not appliers and not has_apply:
        raise DefinitionError(
            f"{where}: {cls.__name__} declares no apply_<event> method and no apply(event)"
        )
    return AggregateDef(
        feature=feature,
        name=name,
        target=cls,
        form="class",
        appliers=tuple(sorted(appliers)),
        has_apply=has_apply,
        snapshot_every=snapshot_every,
        version=_version(cls, version),
    )


def _version(target: Any, declared: int | str | None) -> str:
    """The declared version, else a digest of the code: a changed class or fold function
    makes the snapshots of its older shape unusable."""
    if declared is not None:
        return f"v:{declared}"
    try:
        source = inspect.getsource(target)
    except (OSError, TypeError):
        # No source (defined in a REPL): its name and methods stand for it.
        members = sorted(attr for attr in dir(target) if not attr.startswith("__"))
        source = f"{target.__qualname__}:{','.join(members)}"
    return "h:" + hashlib.sha256(source.encode()).hexdigest()[:16]


def resolve_handlers(aggregate: AggregateDef, event_types: Mapping[str, str]) -> dict[str, str]:
    """Event type -> method for each ``apply_<event>`` method of ``aggregate``.

    ``event_types``: every declared event type (and entity event type) -> its feature. A
    method names an event of the aggregate's own feature first, else the one event of
    another feature with that name; ``DefinitionError`` when it names none, or several.
    """
    by_suffix: dict[str, list[str]] = {}
    for qn in event_types:
        _, _, event_name = qn.partition(":event:")
        by_suffix.setdefault(event_method_name(event_name), []).append(qn)
    where = f"aggregate {aggregate.name!r} of feature {aggregate.feature!r}"
    resolved: dict[str, str] = {}
    for method in aggregate.appliers:
        found = by_suffix.get(method_event_name(method), [])
        own = [qn for qn in found if event_types[qn] == aggregate.feature]
        chosen = own or found
        if not chosen:
            raise DefinitionError(
                f"{where}: {method} names no declared event (expected an event whose name "
                f"reads {method_event_name(method)!r} with '-' and '.' as '_')"
            )
        if len(chosen) > 1:
            raise DefinitionError(
                f"{where}: {method} could fold any of {sorted(chosen)}; use apply(event) and "
                "tell them apart by event.type"
            )
        resolved[chosen[0]] = method
    return resolved


#: What a fold function is: ``fold(state, event) -> state``.
Fold = Callable[[Any, Any], Any]
