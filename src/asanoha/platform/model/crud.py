"""The standard CRUD handlers of an entity, and their define-time risk floors."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, create_model
from pydantic import Field as PydanticField

from asanoha.platform.errors import DefinitionError
from asanoha.platform.model.access import Access, check_access
from asanoha.platform.model.agent import Agent, Risk, is_below
from asanoha.platform.model.entity import Entity, JsonInt, instruction_fields
from asanoha.platform.model.handlers import CrudBinding, CrudVerb, EntityDef, HandlerDef
from asanoha.platform.model.names import make_qn
from asanoha.platform.model.rate_limit import RateLimit

WRITE_VERBS: tuple[CrudVerb, ...] = ("create", "update", "delete", "restore")
READ_VERBS: tuple[CrudVerb, ...] = ("list", "detail")
EXCLUDABLE_VERBS = ("create", "update")


class IdPayload(BaseModel):
    """A payload that names one row."""

    model_config = ConfigDict(extra="forbid")
    id: uuid.UUID


#: The longest ``search`` text of a list.
MAX_SEARCH_LENGTH = 200

#: The largest list offset: far past any page a client reads, and inside a bigint with the
#: page size added.
MAX_LIST_OFFSET = 2**31 - 1


class ListPayload(BaseModel):
    """Paging, sorting and filtering of a standard list."""

    # Strict: "1" is no limit and 0 no boolean, as the OpenAPI document's types say.
    model_config = ConfigDict(extra="forbid", strict=True)
    limit: JsonInt = PydanticField(default=50, ge=1, le=500)
    offset: JsonInt = PydanticField(default=0, ge=0, le=MAX_LIST_OFFSET)
    cursor: str | None = None
    sort: list[str] | None = None
    filter: dict[str, Any] | None = None
    include_deleted: bool = False
    #: Also answer ``total``: every row the filter and search match (a second query).
    with_total: bool = False
    #: Words every row must hold in its ``searchable=True`` fields.
    search: str | None = PydanticField(default=None, max_length=MAX_SEARCH_LENGTH)


def check_exclusions(
    entity_def_name: str, entity: Entity, exclude_fields: Mapping[str, Iterable[str]] | None
) -> dict[str, frozenset[str]]:
    """Validate ``exclude_fields``: known verbs, known fields, nothing that must be sent."""
    result: dict[str, frozenset[str]] = {}
    for verb, names in (exclude_fields or {}).items():
        if verb not in EXCLUDABLE_VERBS:
            raise DefinitionError(
                f"crud {entity_def_name!r}: exclude_fields takes 'create' and 'update', not {verb!r}"
            )
        excluded = frozenset(names)
        for name in sorted(excluded):
            if name not in entity.fields:
                raise DefinitionError(
                    f"crud {entity_def_name!r}: exclude_fields[{verb!r}] names unknown field {name!r}"
                )
            declared = entity.fields[name]
            if verb == "create" and declared.required and not declared.has_default:
                raise DefinitionError(
                    f"crud {entity_def_name!r}: field {name!r} is required without a default, "
                    "so it cannot be excluded from create"
                )
        result[verb] = excluded
    return result


@dataclasses.dataclass(frozen=True)
class RiskFloor:
    """The lowest risk a standard handler may resolve to, why, and how to lower it."""

    risk: Risk
    why: str
    remedy: str


def risk_floor(entity_def: EntityDef, verb: CrudVerb) -> RiskFloor | None:
    """The floor of the standard handler ``verb`` of ``entity_def``, or ``None``."""
    entity = entity_def.entity
    if verb == "delete" and not entity.soft_delete:
        return RiskFloor(
            "high",
            "it hard-deletes (the entity has no soft delete), which is irreversible",
            "declare Agent(risk='high') on it, or give the entity soft_delete=True",
        )
    if verb in ("create", "update"):
        excluded = entity_def.exclude_fields.get(verb, frozenset())
        flagged = instruction_fields(entity, verb, excluded)
        if flagged:
            return RiskFloor(
                "high",
                f"it can write the read_as_instruction fields {sorted(flagged)}",
                f"declare Agent(risk='high') on it, or exclude those fields from {verb}",
            )
    return None


def apply_floor(qn: str, declared: Agent | None, floor: RiskFloor | None) -> Agent | None:
    """Raise when ``declared`` is below the floor; otherwise the agent hints to store."""
    if floor is None:
        return declared
    if declared is not None and declared.risk is not None:
        if is_below(declared.risk, floor.risk):
            raise DefinitionError(
                f"{qn} declares Agent(risk={declared.risk!r}) but {floor.why}; it resolves to "
                f"{floor.risk!r}. To fix it, {floor.remedy}"
            )
        return declared
    # Keep the other declared hints: they are checked against the floored risk.
    return dataclasses.replace(declared, risk=floor.risk) if declared else Agent(risk=floor.risk)


def build_crud_handlers(
    entity_def: EntityDef,
    *,
    write: Access | None,
    read: Access | None,
    verbs: Iterable[CrudVerb] | None,
    agent: Mapping[str, Agent] | None,
    descriptions: Mapping[str, str] | None,
    rate_limit: RateLimit | Mapping[str, RateLimit] | None = None,
    rate_limit_reason: str | None = None,
    replica: bool = False,
) -> list[HandlerDef]:
    """The standard handlers of ``entity_def``, floors applied; with ``replica`` its queries
    may read the read replica."""
    entity = entity_def.entity
    default_verbs = [v for v in WRITE_VERBS + READ_VERBS if v != "restore" or entity.soft_delete]
    chosen = list(verbs) if verbs is not None else default_verbs
    agent = agent or {}
    descriptions = descriptions or {}
    limits = rate_limit if isinstance(rate_limit, Mapping) else dict.fromkeys(chosen, rate_limit)
    for verb in [*agent, *descriptions, *limits, *chosen]:
        if verb not in WRITE_VERBS + READ_VERBS:
            raise DefinitionError(f"crud {entity_def.name!r}: unknown verb {verb!r}")
    handlers = []
    for verb in chosen:
        kind: Literal["write", "query"] = "write" if verb in WRITE_VERBS else "query"
        qn = make_qn(entity_def.feature, kind, f"{entity_def.name}:{verb}")
        if verb == "restore" and not entity.soft_delete:
            raise DefinitionError(f"{qn}: restore needs an entity with soft_delete=True")
        # Only a standard handler may confine callers to their own rows (owner=).
        access = check_access(write if kind == "write" else read, qn, fields=entity.fields)
        handlers.append(
            HandlerDef(
                qn=qn,
                kind=kind,
                feature=entity_def.feature,
                func=_standard_func(entity_def.key, verb),
                payload_model=_payload_model(entity_def, verb),
                access=access,
                agent=apply_floor(qn, agent.get(verb), risk_floor(entity_def, verb)),
                description=descriptions.get(verb),
                crud=CrudBinding(entity=entity_def.name, verb=verb),
                rate_limit=limits.get(verb),
                rate_limit_reason=None if limits.get(verb) else rate_limit_reason,
                replica=replica and kind == "query",
            )
        )
    return handlers


def _payload_model(entity_def: EntityDef, verb: CrudVerb) -> type[BaseModel]:
    entity = entity_def.entity
    prefix = "".join(part.capitalize() for part in entity_def.name.split("-"))
    if verb == "create":
        fields_model = entity.create_model(entity_def.exclude_fields.get("create", ()))
        model: type[BaseModel] = create_model(
            f"{prefix}CreatePayload",
            __base__=fields_model,
            id=(uuid.UUID | None, PydanticField(default=None, description="optional stream id")),
        )
        return model
    if verb == "update":
        changes = entity.changes_model(entity_def.exclude_fields.get("update", ()))
        update: type[BaseModel] = create_model(
            f"{prefix}UpdatePayload",
            __config__=ConfigDict(extra="forbid"),
            id=(uuid.UUID, ...),
            version=(
                JsonInt,
                PydanticField(ge=1, description="the version you read"),
            ),
            changes=(changes, ...),
        )
        return update
    if verb == "list":
        return ListPayload
    return IdPayload


def _standard_func(entity_key: str, verb: CrudVerb) -> Any:
    def create(payload: Any, ctx: Any) -> Any:
        return ctx.entity(entity_key).create(payload.model_dump(exclude_unset=True))

    def update(payload: Any, ctx: Any) -> Any:
        changes = payload.changes.model_dump(exclude_unset=True)
        return ctx.entity(entity_key).update(payload.id, changes, version=payload.version)

    def delete(payload: Any, ctx: Any) -> Any:
        return ctx.entity(entity_key).delete(payload.id)

    def restore(payload: Any, ctx: Any) -> Any:
        return ctx.entity(entity_key).restore(payload.id)

    def list_rows(payload: Any, ctx: Any) -> Any:
        return ctx.entity(entity_key).list(**payload.model_dump())

    def detail(payload: Any, ctx: Any) -> Any:
        reader = ctx.entity(entity_key)
        return reader.with_refs(reader.get(payload.id))

    return {
        "create": create,
        "update": update,
        "delete": delete,
        "restore": restore,
        "list": list_rows,
        "detail": detail,
    }[verb]
