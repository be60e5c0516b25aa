"""Retention: how long things are kept.

Ages (``keep_for="365d"``) serve event types, ``asanoha events prune --older-than`` and an
entity's row retention, ``Entity(retention=Retention(keep_for="90d", strategy=...))``.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, get_args

from asanoha.platform.errors import DefinitionError
from asanoha.platform.model.fields import Field

_AGE = re.compile(r"^(\d+)([dhm])$")
_UNITS = {"d": "days", "h": "hours", "m": "minutes"}

#: What becomes of a row once it is older than its entity's ``keep_for``.
RetentionStrategy = Literal["hard_delete", "anonymize", "block_delete"]
STRATEGIES: tuple[str, ...] = get_args(RetentionStrategy)


def parse_age(text: str | dt.timedelta) -> dt.timedelta:
    """``365d``, ``12h`` or ``30m`` (or a positive ``timedelta``) as a duration;
    ``ValueError`` saying how to write one otherwise."""
    if isinstance(text, dt.timedelta):
        if text <= dt.timedelta(0):
            raise ValueError(f"{text!r} is no age: it must be positive")
        return text
    found = _AGE.match(str(text).strip())
    if found is None or int(found.group(1)) < 1:
        raise ValueError(f"{text!r} is no age: write a count and d, h or m (e.g. 365d)")
    return dt.timedelta(**{_UNITS[found.group(2)]: int(found.group(1))})


@dataclass(frozen=True)
class Retention:
    """An entity's retention policy. A row's age is measured from its ``created_at`` (the
    time of its ``created`` event, which a projection rebuild writes again):

    - ``hard_delete``: a daily job deletes the rows older than ``keep_for``, through the
      entity's delete (its gates, hooks, references and ``deleted`` event);
    - ``anonymize``: the daily job forgets the personal values of those rows (their data
      key is destroyed); the rows stay, their personal fields read ``FORGOTTEN``;
    - ``block_delete``: a row younger than ``keep_for`` cannot be deleted or forgotten
      (409 ``retention_blocks_delete``); the job does nothing.

    Checked when the ``Entity`` is defined (see ``check_retention``)."""

    keep_for: str | dt.timedelta
    strategy: RetentionStrategy

    @property
    def age(self) -> dt.timedelta:
        """``keep_for`` as a duration."""
        return parse_age(self.keep_for)

    @property
    def runs_daily(self) -> bool:
        """Whether the daily retention job acts on the entity (``block_delete`` only
        refuses deletes)."""
        return self.strategy != "block_delete"


def check_retention(
    table: str, fields: Mapping[str, Field], soft_delete: bool, retention: object
) -> None:
    """Fail unless ``retention`` is ``None`` or a policy the entity can keep; the
    ``DefinitionError`` names the entity and what to change."""
    where = f"entity {table!r}: retention"
    if retention is None:
        return
    if not isinstance(retention, Retention):
        raise DefinitionError(
            f"{where} takes Retention(keep_for='90d', strategy=...), not {retention!r}"
        )
    if retention.strategy not in STRATEGIES:
        raise DefinitionError(
            f"{where} strategy={retention.strategy!r} is unknown; use one of "
            f"{', '.join(repr(s) for s in STRATEGIES)}"
        )
    try:
        parse_age(retention.keep_for)
    except ValueError as exc:
        raise DefinitionError(f"{where} keep_for: {exc}") from None
    if retention.strategy == "hard_delete" and soft_delete:
        # The entity's delete only marks a soft-deleted row: the row and its values would stay.
        raise DefinitionError(
            f"{where} strategy='hard_delete' removes rows, but the entity has "
            "soft_delete=True, whose delete only marks them deleted; use strategy='anonymize' "
            "to forget their personal values, or drop soft_delete"
        )
    if retention.strategy == "anonymize":
        _check_anonymizable(where, fields)


def _check_anonymizable(where: str, fields: Mapping[str, Field]) -> None:
    """Anonymizing forgets the row's own subject: its ``personal="self"`` values. A value of
    another subject (``personal={"of": ...}`` or ``"tenant"``) is sealed under that subject's
    key, shared with other rows, and would stay readable: refused rather than half done."""
    own = sorted(name for name, f in fields.items() if f.personal == "self")
    others = sorted(name for name, f in fields.items() if f.is_personal and f.personal != "self")
    if not own:
        raise DefinitionError(
            f"{where} strategy='anonymize' forgets a row's personal values, but the entity "
            "has no personal='self' field, so there is nothing to forget; use "
            "strategy='hard_delete' or 'block_delete'"
        )
    if others:
        raise DefinitionError(
            f"{where} strategy='anonymize' forgets the row's own personal values, but "
            f"field(s) {others} hold personal data of another subject (personal={{'of': ...}} "
            "or 'tenant'), which would stay readable; use strategy='hard_delete', or declare "
            "them personal='self'"
        )
