"""State transitions of an entity's fields: which value may follow which.

``Entity(..., transitions={"status": {"draft": ["review"], "review": ["draft", "published"]}})``
declares, per field, the states a row may move to from each state. A create must start in one
of the map's keys (its initial states: ``draft`` or ``review`` above); a state that is only a
target (``published``) is final. An update that leaves the value as it is moves nothing and is
not checked. The executor checks every create and update before it appends the event; a handler
that must move freely (a data repair, an import) declares ``skip_transition_guard="<reason>"``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from asanoha.platform.errors import DefinitionError, Reasons, UnprocessableError
from asanoha.platform.model.fields import Field

#: field -> state -> the states it may move to.
StateMap = Mapping[str, Mapping[str, Sequence[str]]]
#: The field kinds whose values are states.
STATE_KINDS = frozenset({"select", "text"})


def check_transitions(
    entity: str, fields: Mapping[str, Field], transitions: Mapping[str, Any]
) -> dict[str, dict[str, tuple[str, ...]]]:
    """The frozen form of ``transitions``; ``DefinitionError`` naming ``entity`` when it
    names a field that is not a select or text field, or a state a select field lacks."""
    if not isinstance(transitions, Mapping):
        raise DefinitionError(
            f"entity {entity!r}: transitions= maps field names to {{state: [next states]}}"
        )
    checked: dict[str, dict[str, tuple[str, ...]]] = {}
    for name, moves in transitions.items():
        declared = fields.get(name)
        if declared is None:
            raise DefinitionError(
                f"entity {entity!r}: transitions name the unknown field {name!r}; "
                f"declare it in fields= (a select or text field)"
            )
        if declared.kind not in STATE_KINDS:
            raise DefinitionError(
                f"entity {entity!r}: transitions of field {name!r} need a select or text "
                f"field, not {declared.kind}"
            )
        checked[name] = _check_moves(entity, name, declared, moves)
    return checked


def _check_moves(entity: str, name: str, declared: Field, moves: Any) -> dict[str, tuple[str, ...]]:
    if not isinstance(moves, Mapping) or not moves:
        raise DefinitionError(
            f"entity {entity!r}: transitions of field {name!r} map each state to the list "
            "of states it may move to, e.g. {'draft': ['review']}"
        )
    frozen: dict[str, tuple[str, ...]] = {}
    for state, targets in moves.items():
        if not isinstance(state, str) or isinstance(targets, str) or not _is_list(targets):
            raise DefinitionError(
                f"entity {entity!r}: transitions of field {name!r}: state {state!r} must be a "
                f"text mapped to a list of states, not {targets!r}"
            )
        frozen[state] = tuple(targets)
    named = set(frozen) | {target for targets in frozen.values() for target in targets}
    if declared.kind == "select":
        unknown = sorted(named - set(declared.choices))
        if unknown:
            raise DefinitionError(
                f"entity {entity!r}: transitions of field {name!r} name {unknown}, which "
                f"are not among its choices {list(declared.choices)}"
            )
    return frozen


def _is_list(value: Any) -> bool:
    return isinstance(value, Sequence) and all(isinstance(item, str) for item in value)


def check_move(
    entity_key: str,
    transitions: StateMap,
    previous: Mapping[str, Any] | None,
    values: Mapping[str, Any],
) -> None:
    """Refuse (422 ``invalid_transition``) a create that does not start in an initial state or
    an update that moves a field outside its map; ``previous`` is ``None`` on create."""
    for name, moves in transitions.items():
        if previous is not None and name not in values:
            continue
        old = None if previous is None else previous.get(name)
        new = values.get(name)
        if previous is not None and new == old:
            continue
        # From no state (a create, or a row written before the map was declared) a row may
        # enter any initial state.
        allowed = tuple(moves) if old is None else tuple(moves.get(old, ()))
        if new not in allowed:
            raise UnprocessableError(
                Reasons.INVALID_TRANSITION,
                entity=entity_key,
                field=name,
                allowed=list(allowed),
                **{"from": old, "to": new},
            )
