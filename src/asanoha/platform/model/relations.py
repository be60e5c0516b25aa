"""``has_many``: the rows of another entity that refer to a row, and their nested create.

``Entity(fields={"lines": fields.has_many(order_line, via="order", nested=True)})`` says
that the rows of ``order_line`` whose reference field ``order`` holds an order's id are that
order's lines. It is no column: ``Entity`` keeps it apart from its fields (``children``).
With ``nested=True`` the parent's create takes ``lines`` (a list of the child's create
payloads without ``via``) and creates each child with the parent, in the same transaction,
each through the child entity's own write path (its rules, gates and events); one level
deep: a nested child declares no nested children of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from asanoha.platform.errors import DefinitionError
from asanoha.platform.model.kept import kept

if TYPE_CHECKING:
    from asanoha.platform.model.entity import Entity

#: Most children one nested create takes for one relation.
MAX_NESTED_CHILDREN = 200


@dataclass(frozen=True)
class HasMany:
    """The rows of ``entity`` whose reference field ``via`` refers to a row."""

    entity: Entity
    via: str
    #: Whether the parent's create takes them (created with it, in its transaction).
    nested: bool = False
    description: str | None = None


def has_many(
    entity: Entity, *, via: str, nested: bool = False, description: str | None = None
) -> HasMany:
    """The rows of ``entity`` whose reference field ``via`` refers to this row; with
    ``nested=True`` the create of this row takes them too (depth 1)."""
    return HasMany(entity, via, bool(nested), description)


def nested_relations(entity: Entity) -> tuple[str, ...]:
    """The names of the ``has_many`` relations a create of ``entity`` takes."""
    # Every create asks.
    return kept(
        entity,
        "nested_relations",
        lambda: tuple(name for name, relation in entity.children.items() if relation.nested),
    )


def check_children(table: str, children: dict[str, HasMany]) -> None:
    """Definition errors of an entity's ``has_many`` relations (naming entity and field)."""
    for name, relation in children.items():
        child = relation.entity
        where = f"entity {table!r}: has_many {name!r}"
        via = child.fields.get(relation.via)
        if via is None or via.kind != "reference":
            raise DefinitionError(
                f"{where}: via={relation.via!r} must name a reference field of "
                f"{child.table!r} (its reference fields: "
                f"{sorted(n for n, f in child.fields.items() if f.kind == 'reference')})"
            )
        if relation.nested and any(inner.nested for inner in child.children.values()):
            raise DefinitionError(
                f"{where}: nested creates go one level deep; {child.table!r} declares nested "
                "children of its own"
            )
