"""Backfill a new field's ``default=`` in the revision that adds its column.

Autogenerate adds a nullable column and nothing else, so rows written before the field existed
hold NULL: a filter on the default finds none of them. A revision that adds the column of a
field declared with a plain default therefore also sets the default on the rows that have none.
A projection rebuild agrees: a ``created`` event written before the field existed carries no
value for it, and the row rebuilt from that event takes the field's default (see
``store.projections.row_change``).

No backfill is written when SQL cannot express it: a default computed by a callable, a personal
field (its values are sealed per subject, never written in plain text), or a value of the
``json`` kind. The command says so, and the migrations guide
(``docs/guides/migrations.md``) shows the remedy.
"""

from __future__ import annotations

import datetime as dt
import decimal
from dataclasses import dataclass
from typing import Any

from alembic.autogenerate import renderers
from alembic.autogenerate.api import AutogenContext
from alembic.operations import ops

from asanoha.platform.model import Registry
from asanoha.platform.model.fields import Field

#: Types of default the revision can hold as a literal. A decimal and a date are written as
#: their text, which both databases read into the column (Postgres casts it, SQLite stores
#: the text the column's type stores anyway).
_LITERAL_TYPES: tuple[type, ...] = (bool, int, float, str, decimal.Decimal, dt.date)


def _literal(value: Any) -> Any:
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, dt.date):
        return value.isoformat()
    return value


@dataclass(frozen=True)
class Backfill:
    """``UPDATE table SET column = value WHERE column IS NULL`` in a revision."""

    table: str
    column: str
    value: Any


class BackfillDefaultOp(ops.MigrateOperation):
    """The revision step that writes one backfill (rendered as ``op.execute``)."""

    def __init__(self, backfill: Backfill) -> None:
        self.backfill = backfill

    def reverse(self) -> ops.MigrateOperation:
        # Dropping the column on downgrade drops the backfilled values with it.
        return self


@renderers.dispatch_for(BackfillDefaultOp)
def _render_backfill(autogen_context: AutogenContext, op: BackfillDefaultOp) -> str:
    backfill = op.backfill
    value = repr(_literal(backfill.value))
    statement = (
        f"UPDATE {backfill.table} SET {backfill.column} = :value WHERE {backfill.column} IS NULL"
    )
    return f"op.execute(sa.text({statement!r}).bindparams(value={value}))"


def backfill_value(declared: Field) -> tuple[bool, str]:
    """Whether SQL can backfill ``declared``'s default, and why not when it cannot."""
    if not declared.has_default:
        return False, "it has no default"
    if callable(declared.default):
        return False, "its default is computed by a callable"
    if declared.is_personal:
        return False, "it is personal (values are sealed per subject)"
    if type(declared.default) not in _LITERAL_TYPES:
        return False, f"a {type(declared.default).__name__} default cannot be written as SQL"
    return True, ""


def add_backfills(script: ops.MigrationScript, registry: Registry) -> list[str]:
    """Add a backfill after every added column of a field with a plain default; one line per
    added column with a default, saying what was done (or why not)."""
    fields = {entity_def.entity.table: entity_def.entity.fields for entity_def in registry.entities}
    said: list[str] = []
    for upgrade in script.upgrade_ops_list:
        placed: list[ops.MigrateOperation] = []
        for step in upgrade.ops:
            placed.append(step)
            if not isinstance(step, ops.ModifyTableOps):
                continue
            for change in step.ops:
                if not isinstance(change, ops.AddColumnOp):
                    continue
                declared = fields.get(step.table_name, {}).get(change.column.name)
                if declared is None or not declared.has_default:
                    continue
                where = f"{step.table_name}.{change.column.name}"
                fillable, why_not = backfill_value(declared)
                if not fillable:
                    said.append(f"no backfill for {where}: {why_not}; existing rows hold NULL")
                    continue
                placed.append(
                    BackfillDefaultOp(
                        Backfill(step.table_name, change.column.name, declared.default)
                    )
                )
                said.append(f"backfill: existing rows of {where} get {declared.default!r}")
        upgrade.ops = placed
    return said
