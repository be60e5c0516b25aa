"""``asanoha features``: switch toggleable features on or off per tenant, and set or list
features' configuration (``features config``) and secrets (``features secret``)."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer

from asanoha.cli.app_loading import AppOption, load_app
from asanoha.cli.listings import JsonOption, print_json, print_table
from asanoha.platform.errors import AsanohaError

features = typer.Typer(
    help="Features per tenant: enable, disable, list; their configuration and secrets."
)
config = typer.Typer(help="Features' configuration per tenant: set, list.")
secret = typer.Typer(help="Features' secrets per tenant (write-only): set.")
features.add_typer(config, name="config")
features.add_typer(secret, name="secret")

TenantOption = Annotated[str, typer.Option("--tenant", help="The tenant.")]
NameArgument = Annotated[str, typer.Argument(help="The feature's name.")]
KeyArgument = Annotated[
    str, typer.Argument(help="FEATURE.KEY (a feature's key), or tz / locale (the tenant's).")
]


@features.command()
def enable(name: NameArgument, tenant: TenantOption, app: AppOption) -> None:
    """Switch a toggleable feature on in a tenant."""
    _switch(name, tenant, app, enabled=True)


@features.command()
def disable(name: NameArgument, tenant: TenantOption, app: AppOption) -> None:
    """Switch a toggleable feature off in a tenant: its handlers answer 403
    ``feature_disabled`` there."""
    _switch(name, tenant, app, enabled=False)


def _switch(name: str, tenant: str, app: str, *, enabled: bool) -> None:
    service = load_app(app).service
    try:
        with service.database.begin() as conn:
            service.feature_settings.set_enabled(conn, tenant, name, enabled, "cli")
    except ValueError as error:
        typer.echo(str(error), err=True)
        raise typer.Exit(1) from None
    typer.echo(f"{name}: {'enabled' if enabled else 'disabled'} for tenant {tenant}")


@features.command("list")
def list_features(tenant: TenantOption, app: AppOption, as_json: JsonOption = False) -> None:
    """The toggleable features and whether each is on in a tenant."""
    service = load_app(app).service
    settings = service.feature_settings
    with service.database.connect() as conn:
        states = {name: settings.is_enabled(conn, tenant, name) for name in settings.toggleable}
    if as_json:
        print_json({"features": [{"feature": n, "enabled": on} for n, on in states.items()]})
        return
    print_table(("feature", "enabled"), ((n, str(on).lower()) for n, on in sorted(states.items())))


@config.command("set")
def set_config(
    key: KeyArgument,
    value: Annotated[str, typer.Argument(help="The value as JSON (a bare word is a text).")],
    app: AppOption,
    tenant: Annotated[
        str | None, typer.Option("--tenant", help="The tenant (omit with --every-tenant).")
    ] = None,
    every_tenant: Annotated[
        bool, typer.Option("--every-tenant", help="Set the value for every tenant.")
    ] = False,
) -> None:
    """Set a configuration key for a tenant, or for every tenant (the only way to set a
    key declared ``per_tenant=False``). Exits 1 for an unknown key or a refused value."""
    if (tenant is None) == (not every_tenant):
        typer.echo("pass --tenant T or --every-tenant (one of them)", err=True)
        raise typer.Exit(1)
    feature, name = _split(key)
    service = load_app(app).service
    try:
        with service.database.begin() as conn:
            stored = service.feature_settings.set_config(
                conn, tenant, feature, name, _parse(value), "cli", for_every_tenant=every_tenant
            )
    except AsanohaError as error:
        typer.echo(f"{error.reason}: {error.message}", err=True)
        raise typer.Exit(1) from None
    where = "every tenant" if every_tenant else f"tenant {tenant}"
    typer.echo(f"{key} = {json.dumps(stored)} for {where}")


@config.command("list")
def list_config(tenant: TenantOption, app: AppOption, as_json: JsonOption = False) -> None:
    """Every declared key with the value that holds in a tenant and where it comes from;
    and which secrets the tenant has set (never their values)."""
    service = load_app(app).service
    settings = service.feature_settings
    with service.database.connect() as conn:
        listed = settings.list_config(conn, tenant)
        present = settings.secrets_set(conn, tenant)
    if as_json:
        print_json({"config": listed, "secrets": present})
        return
    print_table(
        ("key", "value", "source"),
        (
            (_joined(row["feature"], row["key"]), json.dumps(row["value"]), row["source"])
            for row in listed
        ),
    )
    if present:
        print_table(
            ("secret", "set"),
            ((_joined(r["feature"], r["name"]), str(r["is_set"]).lower()) for r in present),
        )


@secret.command("set")
def set_secret(key: KeyArgument, tenant: TenantOption, app: AppOption) -> None:
    """Set a feature's secret for a tenant from standard input (never an argument: it
    would stay in the shell's history). An empty input removes it."""
    feature, name = _split(key)
    value = sys.stdin.read().rstrip("\r\n")
    service = load_app(app).service
    try:
        with service.database.begin() as conn:
            is_set = service.feature_settings.set_secret(conn, tenant, feature, name, value or None)
    except AsanohaError as error:
        typer.echo(f"{error.reason}: {error.message}", err=True)
        raise typer.Exit(1) from None
    typer.echo(f"{key}: {'set' if is_set else 'removed'} for tenant {tenant}")


def _split(key: str) -> tuple[str, str]:
    # Imported here: ``asanoha --help`` imports this module (see ``asanoha.cli``).
    from asanoha.platform.model.feature_settings import TENANT_SCOPE

    feature, _, name = key.rpartition(".")
    return feature or TENANT_SCOPE, name


def _joined(feature: str | None, key: str) -> str:
    from asanoha.platform.model.feature_settings import TENANT_SCOPE

    return key if feature in (None, TENANT_SCOPE) else f"{feature}.{key}"


def _parse(value: str) -> Any:
    try:
        return json.loads(value)
    except ValueError:
        return value
