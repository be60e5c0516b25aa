"""Entity hooks are checked when they are declared."""

from __future__ import annotations

import re
from typing import Any

import pytest

from asanoha import Access, App, DefinitionError, Entity, Feature, fields

ADMIN = Access(roles=["Admin"])


def feature() -> Feature:
    declared = Feature("hooked")
    declared.crud(
        "thing",
        Entity(table="things", fields={"size": fields.integer()}),
        write=ADMIN,
        read=ADMIN,
    )
    return declared


@pytest.mark.parametrize(
    ("kind", "shape"),
    [
        ("validate", "hook(data, previous, is_new)"),
        ("pre_save", "hook(changes, previous, is_new)"),
        ("post_save", "hook(row, ctx)"),
        ("pre_delete", "hook(row, ctx)"),
        ("post_delete", "hook(row, ctx)"),
        ("after_commit", "hook(event)"),
    ],
)
def test_a_hook_with_the_wrong_parameters_is_a_definition_error(kind: str, shape: str) -> None:
    declared = feature()

    def wrong(a: Any, b: Any, c: Any, d: Any) -> None: ...

    pattern = rf"'hooked', entity 'thing'.*{kind}.*{re.escape(shape)}"
    with pytest.raises(DefinitionError, match=pattern):
        getattr(declared, kind)("thing")(wrong)


def test_an_async_hook_is_a_definition_error() -> None:
    async def hook(event: Any) -> None: ...

    with pytest.raises(DefinitionError, match="not async def"):
        feature().after_commit("thing")(hook)


def test_a_hook_with_defaults_or_star_args_is_accepted() -> None:
    declared = feature()
    declared.validate("thing")(lambda *args: None)
    declared.after_commit("thing")(lambda event, extra=None: None)


def test_a_hook_of_an_unknown_entity_is_refused_when_the_app_is_built() -> None:
    declared = feature()
    declared.pre_delete("nothing")(lambda row, ctx: None)
    with pytest.raises(DefinitionError, match="unknown entity 'nothing'"):
        App(features=[declared])
