"""Event versions and rebuilds: a feature whose event and entity moved through three shapes,
and helpers that store events as older code wrote them."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

from asanoha import Access, Entity, Feature, fields
from asanoha.platform.consumers import ConsumerContext
from asanoha.platform.model.versions import FieldUpcaster, PayloadUpcaster
from asanoha.platform.store import StoredEvent, append_event, stream_version
from asanoha.testing import Stack
from asanoha.testing.plugin import StackFactory

TENANT = "tenant-a"
ADMIN = Access(roles=["Admin"])
FEATURE = "crm"
RENAMED = f"{FEATURE}:event:renamed"
CUSTOMER = f"{FEATURE}:customer"


class Renamed(BaseModel):
    """Version 3: the name split in two (version 1: ``name``, version 2: ``full_name``)."""

    first: str
    last: str


def rename_name(payload: dict[str, Any]) -> dict[str, Any]:
    """1 -> 2: ``name`` became ``full_name``."""
    return {"full_name": payload.pop("name"), **payload}


def split_name(payload: dict[str, Any]) -> dict[str, Any]:
    """2 -> 3: ``full_name`` split into ``first`` and ``last``."""
    first, _, last = payload.pop("full_name").partition(" ")
    return {"first": first, "last": last, **payload}


def rename_field(values: dict[str, Any], verb: str) -> dict[str, Any]:
    """Entity 1 -> 2: the field ``name`` became ``full_name``."""
    if "name" in values:
        values["full_name"] = values.pop("name")
    return values


def split_field(values: dict[str, Any], verb: str) -> dict[str, Any]:
    """Entity 2 -> 3: ``full_name`` split; ``tier`` is new and required (``basic``)."""
    if "full_name" in values:
        first, _, last = values.pop("full_name").partition(" ")
        values |= {"first_name": first, "last_name": last}
    if verb == "created":
        values.setdefault("tier", "basic")
    return values


EVENT_UPCASTERS: dict[int, PayloadUpcaster] = {1: rename_name, 2: split_name}
ENTITY_UPCASTERS: dict[int, FieldUpcaster] = {1: rename_field, 2: split_field}

Handler = Callable[[StoredEvent, ConsumerContext], None]


def crm(
    handler: Handler | None = None,
    *,
    event_upcasters: dict[int, PayloadUpcaster] | None = None,
    entity_upcasters: dict[int, FieldUpcaster] | None = None,
    unique: bool = False,
) -> Feature:
    """The feature at version 3: the event ``renamed``, the entity ``customer`` and a consumer
    of both calling ``handler``."""
    feature = Feature(FEATURE)
    feature.crud(
        "customer",
        Entity(
            table="crm_customers",
            fields={
                "first_name": fields.text(personal=False, reason="fixture"),
                "last_name": fields.text(personal=False, reason="fixture"),
                "tier": fields.text(
                    required=True, default="basic", personal=False, reason="fixture"
                ),
            },
            unique=(("first_name", "last_name"),) if unique else (),
            version=3,
            upcasters=ENTITY_UPCASTERS if entity_upcasters is None else entity_upcasters,
        ),
        write=ADMIN,
        read=ADMIN,
    )
    renamed = feature.event(
        "renamed",
        Renamed,
        version=3,
        upcasters=EVENT_UPCASTERS if event_upcasters is None else event_upcasters,
    )

    @feature.consumer(
        "follow",
        on=[renamed.qn, f"{FEATURE}:event:customer.created", f"{FEATURE}:event:customer.updated"],
    )
    def follow(event: StoredEvent, ctx: ConsumerContext) -> None:
        if handler is not None:
            handler(event, ctx)

    return feature


def store_event(
    stack: Stack,
    stream: str,
    type_: str,
    payload: dict[str, Any],
    schema_version: int,
    *,
    stream_type: str = FEATURE,
    tenant: str = TENANT,
) -> StoredEvent:
    """Append an event as code of ``schema_version`` wrote it (its payload as given)."""
    with stack.db.begin() as conn:
        return append_event(
            conn,
            stack.db.backend,
            stack.tables,
            tenant_id=tenant,
            stream_id=stream,
            stream_type=stream_type,
            expected_version=stream_version(conn, stack.tables, tenant, stream),
            type=type_,
            payload=payload,
            metadata={},
            created_by="old-code",
            schema_version=schema_version,
        )


def store_customer_history(stack: Stack, tenant: str = TENANT) -> str:
    """A customer stream written by versions 1, 2 and 3 of the entity; returns its id."""
    stream = str(uuid.uuid4())
    created, updated = f"{FEATURE}:event:customer.created", f"{FEATURE}:event:customer.updated"
    kwargs: dict[str, Any] = {"stream_type": CUSTOMER, "tenant": tenant}
    store_event(stack, stream, created, {"data": {"name": "Ada Lovelace"}}, 1, **kwargs)
    store_event(stack, stream, updated, {"changes": {"full_name": "Ada King"}}, 2, **kwargs)
    store_event(stack, stream, updated, {"changes": {"tier": "gold"}}, 3, **kwargs)
    return stream


@pytest.fixture(params=["postgres", "sqlite"])
def database(request: pytest.FixtureRequest) -> str:
    """The database the suite runs on."""
    kind: str = request.param
    return kind


@pytest.fixture
def history_stack(asanoha_stack: StackFactory, database: str) -> Callable[..., Stack]:
    """``history_stack(features)``: a stack on the parametrized database."""

    def make(features: list[Feature], **kwargs: Any) -> Stack:
        return asanoha_stack(features=features, database=database, **kwargs)  # type: ignore[arg-type]

    return make
