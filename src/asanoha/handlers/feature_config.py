"""Features' configuration and secrets as handlers for a tenant's administrators:
``config:write:set``, ``config:query:list`` and ``secrets:write:set``. Add
``feature_config.features`` to an application's features to expose them (over HTTP and, as
high-risk tools, to agents).

They act on the caller's tenant only. A secret is write-only: ``secrets:write:set`` answers
whether a value is set, never the value, and no handler returns it (``config:query:list``
lists which secrets are set). ``asanoha features config`` and ``asanoha features secret``
do the same from the command line.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, JsonValue

from asanoha.handlers.consumer_admin import SYSTEM_ADMIN_ROLE
from asanoha.platform.model import Access, Agent, Feature
from asanoha.platform.model.feature_settings import TENANT_SCOPE
from asanoha.platform.service import QueryContext, WriteContext
from asanoha.platform.service.handler_context import platform_request, platform_settings

#: A tenant's administrators (and the operators): a setting changes how every user of the
#: tenant is served, a secret is a credential the tenant's features act with.
ADMINS = Access(roles=["Admin", SYSTEM_ADMIN_ROLE])
#: Changing where mail goes or which credential a feature uses is not undone by a retry.
HIGH_RISK = Agent(risk="high")

config = Feature("config")
secrets = Feature("secrets")
#: Both bundled features.
features = (config, secrets)


class SetConfig(BaseModel):
    """One key of a feature (without ``feature``: the tenant's own keys ``tz`` and
    ``locale``); ``value: null`` goes back to the default."""

    feature: str | None = Field(default=None, max_length=100)
    key: str = Field(max_length=100)
    value: JsonValue = None


class ListConfig(BaseModel):
    """Every declared key (of one feature, if named) with the value that holds in the
    caller's tenant, which secrets are set, and whether each toggleable feature is on."""

    feature: str | None = Field(default=None, max_length=100)


class SetSecret(BaseModel):
    """A feature's secret; ``value: null`` removes it."""

    feature: str = Field(max_length=100)
    name: str = Field(max_length=100)
    value: str | None = Field(default=None, max_length=10_000)


@config.write_handler("set", access=ADMINS, agent=HIGH_RISK)
def set_config(payload: SetConfig, ctx: WriteContext) -> dict[str, Any]:
    """Set a configuration key of a feature for the caller's tenant."""
    feature = payload.feature or TENANT_SCOPE
    stored = platform_settings(ctx).set_config(
        platform_request(ctx).conn, ctx.tenant_id, feature, payload.key, payload.value, ctx.user.id
    )
    return {"feature": payload.feature, "key": payload.key, "value": stored}


@config.query_handler("list", access=ADMINS, agent=HIGH_RISK)
def list_config(payload: ListConfig, ctx: QueryContext) -> dict[str, Any]:
    """The configuration of the caller's tenant, which secrets it has set, and which
    toggleable features are on in it (switched with ``asanoha features enable|disable``)."""
    conn = platform_request(ctx).conn
    settings = platform_settings(ctx)
    listed = settings.list_config(conn, ctx.tenant_id)
    present = settings.secrets_set(conn, ctx.tenant_id)
    switches = settings.list_switches(conn, ctx.tenant_id)
    if payload.feature is not None:
        listed = [row for row in listed if row["feature"] == payload.feature]
        present = [row for row in present if row["feature"] == payload.feature]
        switches = [row for row in switches if row["feature"] == payload.feature]
    return {"config": listed, "secrets": present, "features": switches}


@secrets.write_handler("set", access=ADMINS, agent=HIGH_RISK)
def set_secret(payload: SetSecret, ctx: WriteContext) -> dict[str, Any]:
    """Set (or remove) a feature's secret for the caller's tenant; answers whether it is
    set, never the value."""
    is_set = platform_settings(ctx).set_secret(
        platform_request(ctx).conn, ctx.tenant_id, payload.feature, payload.name, payload.value
    )
    return {"feature": payload.feature, "name": payload.name, "is_set": is_set}
