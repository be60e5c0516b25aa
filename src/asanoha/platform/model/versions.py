"""Event versions: the version an event type is written with and the upcasters that bring
the payloads of older versions to it.

``upcasters={1: up_1_2, 2: up_2_3}`` with ``version=3``: each upcaster is keyed by the version
it reads and returns the payload of the next one, so a version-1 payload passes through both.
A chain may start late (no upcaster for version 1 when no version-1 event was ever stored); a
stored event older than the chain's start fails the boot check (``store.upcasting``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from asanoha.platform.errors import DefinitionError
from asanoha.platform.model.sync_callables import check_not_async

#: ``up(payload) -> payload of the next version`` (it may change the dict it gets).
PayloadUpcaster = Callable[[dict[str, Any]], dict[str, Any]]
#: An entity's: ``up(values, verb) -> values of the next version``; ``values`` are the
#: fields of a ``created`` event (all of them) or of an ``updated`` one (the changed ones).
FieldUpcaster = Callable[[dict[str, Any], str], dict[str, Any]]


def check_versions(owner: str, version: int, upcasters: Mapping[int, Callable[..., Any]]) -> None:
    """Refuse a version below 1 and upcasters keyed outside ``1 .. version - 1``."""
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise DefinitionError(
            f"{owner}: version must be a whole number of at least 1, not {version!r}"
        )
    for read, upcaster in upcasters.items():
        if isinstance(read, bool) or not isinstance(read, int) or not 1 <= read < version:
            raise DefinitionError(
                f"{owner}: upcasters are keyed by the version they read, 1 to {version - 1} "
                f"for version={version}; {read!r} is not one (upcasters={{1: up_1_2}} turns a "
                "version-1 payload into version 2)"
            )
        if not callable(upcaster):
            raise DefinitionError(f"{owner}: the upcaster of version {read} is not callable")
        check_not_async(upcaster, owner, "upcaster", "stored payloads are upcast as they are read")


def oldest_readable(version: int, upcasters: Mapping[int, Any]) -> int:
    """The oldest stored version the chain of upcasters brings to ``version``."""
    oldest = version
    while oldest - 1 in upcasters:
        oldest -= 1
    return oldest
