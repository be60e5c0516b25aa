"""The bundled ``retention`` feature: the daily job that applies each entity's
``Retention`` in each tenant, through the write pipeline.

``App`` adds it when an entity declares ``Retention(strategy="hard_delete" | "anonymize")``
(``block_delete`` needs no job: the executor refuses the delete). Each tick runs
``retention:job:apply`` once per tenant (``per_tenant=True`` when the ``App`` has
``tenants=``, else for the default tenant); an operator runs it at any time with
``asanoha jobs run retention:job:apply`` (payload ``{"entity": "feature:name"}`` for one
entity). Its runs, logs and failures are those of any job: the console's jobs page lists them.

The job asks ``retention:query:due`` for a page of rows older than ``keep_for`` and calls
``retention:write:apply`` once per row, as the tenant's system user. Each row is a write of its
own: the handler is the entry handler and declares ``high`` risk, so the irreversible gate of a
hard delete or a forget passes, as it would for any handler that declares it, and stays shut
for a chain an agent began below ``high``. The row's delete meets its hooks, its restricting
references and its ``deleted`` event; an anonymized row gets a ``row-anonymized`` event on its
stream. A row that cannot go (a restricting reference, a row gone meanwhile) is logged and
left for the next day; any other refusal fails the job.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from asanoha.platform.errors import ConflictError, NotFoundError, Reasons, UnprocessableError
from asanoha.platform.model import SYSTEM_ROLE, Access, Agent, EntityDef, Feature, Retention
from asanoha.platform.service import QueryContext, WriteContext, row_retention
from asanoha.platform.service.handler_context import platform_registry, platform_request
from asanoha.platform.store.row_retention import due_rows

if TYPE_CHECKING:
    from asanoha.workers.job_context import JobContext

FEATURE = "retention"
APPLY_JOB = "retention:job:apply"
DUE_QUERY = "retention:query:due"
APPLY_WRITE = "retention:write:apply"
#: Daily at 02:53 UTC, a quiet hour for most applications, apart from the event prune (03:41).
RUN_AT = "53 2 * * *"
#: Rows read per page of due rows.
PAGE = 200
#: Fifty minutes: below the broker's default visibility timeout (an hour), so an attempt is
#: never delivered twice. Each row commits on its own: a run that times out fails, keeps
#: what it did, and the next day's run goes on from there.
RUN_TIMEOUT = 3000.0
#: Only the platform's own system user reaches the handlers (the job writes as it).
SYSTEM_ONLY = Access(roles=[SYSTEM_ROLE])


class RetentionRun(BaseModel):
    """Which entity (``feature:name``) a manual run applies to; every entity with a
    policy the job acts on when left out."""

    entity: str | None = Field(default=None, min_length=1, max_length=200)


class DuePage(BaseModel):
    """A page of the entity's rows older than its ``keep_for``, after ``after`` in id order."""

    entity: str = Field(min_length=1, max_length=200)
    after: uuid.UUID | None = None
    limit: int = Field(default=PAGE, ge=1, le=1000)


class ApplyToRow(BaseModel):
    """One row the entity's retention has come due for."""

    entity: str = Field(min_length=1, max_length=200)
    id: uuid.UUID


class RowAnonymized(BaseModel):
    """A row's own personal values were forgotten by its entity's retention."""

    entity: str
    keep_for: str


def policies(features: Iterable[Feature]) -> dict[str, Retention]:
    """Entity key -> retention, for the entities whose policy the daily job acts on."""
    return {
        entity_def.key: entity_def.entity.retention
        for feature in features
        for entity_def in feature.entities.values()
        if entity_def.entity.retention is not None and entity_def.entity.retention.runs_daily
    }


def retention_feature(entities: Iterable[str], *, per_tenant: bool) -> Feature:
    """A fresh ``retention`` feature whose job applies the policies of ``entities``
    (``feature:name`` keys); ``per_tenant``: each tick runs once per tenant."""
    keys = tuple(sorted(entities))
    feature = Feature(FEATURE)
    anonymized = feature.event("row-anonymized", RowAnonymized)

    @feature.query_handler(
        "due",
        access=SYSTEM_ONLY,
        agent=Agent(expose=False),
        description="The rows of an entity older than its retention's keep_for, a page.",
    )
    def due(payload: DuePage, ctx: QueryContext) -> dict[str, Any]:
        entity_def = _policy_of(ctx, payload.entity)
        retention = _retention(entity_def)
        page = due_rows(
            platform_request(ctx).conn,
            ctx._service.tables,
            entity_def,
            ctx.tenant_id,
            created_before=row_retention.cutoff(retention, row_retention.now()),
            after=payload.after,
            limit=payload.limit,
            skip_forgotten=retention.strategy == "anonymize",
        )
        return {
            "ids": [str(one) for one in page.ids],
            "after": None if page.after is None else str(page.after),
        }

    @feature.write_handler(
        "apply",
        access=SYSTEM_ONLY,
        # Deleting and forgetting cannot be undone: the irreversible gate asks for high.
        agent=Agent(risk="high", expose=False),
        description="Apply an entity's retention to one row older than its keep_for.",
    )
    def apply(payload: ApplyToRow, ctx: WriteContext) -> dict[str, Any]:
        entity_def = _policy_of(ctx, payload.entity)
        retention = _retention(entity_def)
        rows = ctx.entity(entity_def.key)
        row = rows.detail(payload.id, include_deleted=True)
        # Checked again in the write: the row may be younger than the page said (an id
        # sent by hand), or gone.
        due_before = row_retention.cutoff(retention, row_retention.now())
        if row is None or row["created_at"] >= due_before:
            return {"id": str(payload.id), "applied": False}
        if retention.strategy == "hard_delete":
            rows.delete(payload.id)
        else:
            rows.anonymize(payload.id)
            ctx.append_event(
                anonymized,
                {"entity": entity_def.key, "keep_for": row_retention.describe_age(retention)},
                stream_id=str(payload.id),
            )
        return {"id": str(payload.id), "applied": True, "strategy": retention.strategy}

    @feature.job(
        "apply",
        cron=RUN_AT,
        per_tenant=per_tenant,
        manual=True,
        schema=RetentionRun,
        timeout=RUN_TIMEOUT,
        description="Apply each entity's retention (hard_delete, anonymize) to its old rows.",
    )
    def apply_job(payload: dict[str, Any], ctx: JobContext) -> dict[str, Any]:
        wanted = payload.get("entity")
        chosen = keys if wanted is None else tuple(key for key in keys if key == wanted)
        if not chosen:
            raise UnprocessableError(
                Reasons.UNPROCESSABLE,
                error=f"no entity {wanted!r} declares a retention this job applies; "
                f"it applies to {list(keys)}",
            )
        return {key: apply_entity(ctx, key) for key in chosen}

    return feature


def apply_entity(ctx: JobContext, key: str) -> dict[str, int]:
    """Apply the retention of ``key`` to each due row of the job's tenant, one write per row;
    how many rows were applied and how many were left."""
    applied = left = 0
    after: str | None = None
    while True:
        ctx.checkpoint()
        page = ctx.query_as(ctx.system_user, DUE_QUERY, {"entity": key, "after": after})
        for row_id in page["ids"]:
            try:
                done = ctx.write(APPLY_WRITE, {"entity": key, "id": row_id})
            except (ConflictError, NotFoundError) as refused:
                # A row a restricting reference keeps, or one gone meanwhile: the others go
                # on, and the next run tries it again.
                ctx.log.warning("%s %s left: %s", key, row_id, refused.message)
                left += 1
                continue
            applied += 1 if done["applied"] else 0
        after = page["after"]
        if after is None:
            break
    ctx.log.info("%s: retention applied to %d row(s), %d left", key, applied, left)
    return {"applied": applied, "left": left}


def _policy_of(ctx: QueryContext, key: str) -> EntityDef:
    found = platform_registry(ctx).find_entity(key)
    if found is None or found.entity.retention is None or not found.entity.retention.runs_daily:
        raise UnprocessableError(
            Reasons.UNPROCESSABLE,
            error=f"{key!r} is no entity whose retention the daily job applies",
        )
    return found


def _retention(entity_def: EntityDef) -> Retention:
    retention = entity_def.entity.retention
    assert retention is not None  # _policy_of found one
    return retention
