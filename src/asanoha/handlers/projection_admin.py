"""Projection rebuilds and the list of declared projections as handlers for system
administrators. Add ``projection_admin.feature`` to an application's features to expose them
(over HTTP; the console's Projections page lists through ``projection-admin:query:list``).

``projection-admin:write:rebuild`` rebuilds the caller's tenant's rows of an entity from its
events in a job (``projection-admin:job:rebuild``): a guarded rebuild runs in transactions of
its own beside live writes (see ``asanoha.platform.store.rebuild``), so it cannot run inside
the request's. It is not exposed to agents. A live row without events fails the job with
``projection_orphan_rows`` and its id, unless ``drop_orphans``; ``asanoha projections
rebuild`` runs the same rebuild across tenants, with progress.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from asanoha.handlers.consumer_admin import SYSTEM_ADMIN_ROLE
from asanoha.platform.consumers import operations
from asanoha.platform.consumers.projections import describe_projections
from asanoha.platform.errors import Reasons, UnprocessableError
from asanoha.platform.model import Access, Feature
from asanoha.platform.service import QueryContext, WriteContext
from asanoha.platform.service.handler_context import (
    platform_jobs,
    platform_registry,
    platform_request,
)
from asanoha.platform.store import platform_tables

if TYPE_CHECKING:
    from asanoha.platform.service import Service
    from asanoha.workers.job_context import JobContext

#: System administrators only: a rebuild replaces the rows of a table.
SYSTEM_ADMINS = Access(roles=[SYSTEM_ADMIN_ROLE])
#: The job that runs a rebuild.
REBUILD_JOB = "projection-admin:job:rebuild"
#: Fifty minutes for a replay of every event of the tenant's streams: below the broker's
#: default visibility timeout (an hour), so an attempt is never delivered twice.
REBUILD_TIMEOUT = 3000.0

feature = Feature("projection-admin")


class RebuildRequest(BaseModel):
    """Which entity (``feature:name``), and what to do with live rows that have no events
    and with the rows as they were."""

    entity: str = Field(min_length=1, max_length=200)
    #: Drop live rows that have no events instead of failing.
    drop_orphans: bool = False
    #: Keep the tenant's rows as they were in ``<table>__old``.
    keep: bool = False


@feature.job("rebuild", manual=True, schema=RebuildRequest, timeout=REBUILD_TIMEOUT)
def rebuild_job(payload: dict[str, Any], ctx: JobContext) -> dict[str, Any]:
    """Rebuild the job's tenant's rows of the entity; fails with ``projection_orphan_rows``
    when live rows have no events (not retried: a 4xx error)."""
    from asanoha.platform.store.rebuild import rebuild_guarded

    service = _service_of(ctx)
    request = RebuildRequest.model_validate(payload)
    result = rebuild_guarded(
        service.database,
        service.tables,
        service.registry.entity(request.entity),
        tenant_id=ctx.tenant_id,
        drop_orphans=request.drop_orphans,
        keep=request.keep,
    )
    return {
        "entity": result.entity,
        "replayed": result.replayed,
        "caught_up": result.caught_up,
        "dropped_orphans": list(result.dropped_orphans),
        "kept_table": result.kept_table,
    }


@feature.write_handler(
    "rebuild",
    access=SYSTEM_ADMINS,
    description=(
        "Rebuild the caller's tenant's rows of an entity from its events, in a job, beside live "
        "writes; a row without events fails the job with its id unless drop_orphans."
    ),
)
def rebuild(payload: RebuildRequest, ctx: WriteContext) -> dict[str, Any]:
    """Enqueue the rebuild of an entity of the application for the caller's tenant."""
    if platform_registry(ctx).find_entity(payload.entity) is None:
        raise UnprocessableError(
            Reasons.UNPROCESSABLE, error=f"the application has no entity {payload.entity!r}"
        )
    job_id = platform_jobs(ctx).run(
        REBUILD_JOB, payload.model_dump(), user=ctx.user, within=platform_request(ctx)
    )
    return {"id": str(job_id), "job": REBUILD_JOB, "state": "pending"}


class NoPayload(BaseModel):
    """Takes nothing."""


@feature.query_handler(
    "list",
    access=SYSTEM_ADMINS,
    replica=True,
    description=(
        "Every declared projection: its table, mode and events, and for an async one its "
        "consumer's position, lag and status (outside the operator tenant: its own lag)."
    ),
)
def list_projections(payload: NoPayload, ctx: QueryContext) -> list[dict[str, Any]]:
    """The declared projections with their lag: every tenant's for an operator, the
    caller's tenant's else (as the consumers' status shows it)."""
    registry = platform_registry(ctx)
    names = [found.consumer_qn for found in registry.projections if found.mode == "async"]
    statuses = (
        operations.consumer_statuses(
            platform_request(ctx).conn,
            platform_tables(),
            names,
            tenant_id=None if ctx.in_operator_tenant else ctx.tenant_id,
        )
        if names
        else []
    )
    return describe_projections(registry, statuses)


def _service_of(ctx: JobContext) -> Service:
    # A bundled job operates the application's tables outside any request, as the bundled
    # handlers do through ``platform_request``.
    return ctx._service
