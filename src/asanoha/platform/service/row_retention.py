"""Entity row retention at write time: which rows a policy has come due for, and the hold
of ``block_delete`` on a young row.

The executor asks ``check_delete_allowed`` in each verb that removes a row (delete and
forget), so the hold meets every caller: the standard delete, a custom handler's
``ctx.entity(...).delete``, a job, a consumer, an agent. The daily job (the bundled
``retention`` feature) asks ``cutoff`` which rows are old enough.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from asanoha.platform.errors import ConflictError, Reasons
from asanoha.platform.model import EntityDef, Retention
from asanoha.platform.store.projections import Row


def now() -> dt.datetime:
    """The clock rows are aged by: UTC, the clock their ``created_at`` was written with
    (the time of the ``created`` event)."""
    return dt.datetime.now(dt.UTC)


def cutoff(retention: Retention, at: dt.datetime) -> dt.datetime:
    """Rows created before this time are older than ``keep_for`` at ``at``."""
    return at - retention.age


def describe_age(retention: Retention) -> str:
    """``keep_for`` as it was declared (``"90d"``), for messages."""
    keep_for: Any = retention.keep_for
    return keep_for if isinstance(keep_for, str) else str(keep_for)


def check_delete_allowed(
    entity_def: EntityDef, row: Row, operation: Literal["delete", "forget"]
) -> None:
    """Refuse (409 ``retention_blocks_delete``, naming the entity, the row and the time from
    which it may go) removing a row that ``block_delete`` still keeps. Called after the row
    is read and before anything is written, so a refusal persists nothing."""
    retention = entity_def.entity.retention
    if retention is None or retention.strategy != "block_delete":
        return
    deletable_from = row["created_at"] + retention.age
    if now() < deletable_from:
        raise ConflictError(
            Reasons.RETENTION_BLOCKS_DELETE,
            entity=entity_def.key,
            id=str(row["id"]),
            operation=operation,
            keep_for=describe_age(retention),
            deletable_from=deletable_from.isoformat(),
        )
