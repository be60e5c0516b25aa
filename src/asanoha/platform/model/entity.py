"""Entities: a table, typed fields and the pydantic models that validate their data."""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import uuid
import zoneinfo
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    JsonValue,
    PlainSerializer,
    PlainValidator,
    Strict,
    StringConstraints,
    WithJsonSchema,
    create_model,
)
from pydantic import Field as PydanticField

from asanoha.platform.errors import DefinitionError
from asanoha.platform.model.access import check_field_access
from asanoha.platform.model.field_rules import check_field_options, json_schema_of
from asanoha.platform.model.fields import (
    EMBEDDABLE_KINDS,
    FILE_KINDS,
    INSTRUCTION_KINDS,
    STRUCTURED_KINDS,
    TEXT_KINDS,
    Field,
)
from asanoha.platform.model.files import check_file_options
from asanoha.platform.model.files import input_schema as file_input_schema
from asanoha.platform.model.kept import kept
from asanoha.platform.model.located_time import LOCATED_SCHEMA, parse_located
from asanoha.platform.model.money import MONEY_SCHEMA, parse_money
from asanoha.platform.model.relations import MAX_NESTED_CHILDREN, HasMany, check_children
from asanoha.platform.model.retention import Retention, check_retention
from asanoha.platform.model.transitions import check_transitions
from asanoha.platform.model.versions import FieldUpcaster, PayloadUpcaster, check_versions

#: Columns every entity table has; field names may not shadow them.
BASE_COLUMNS = frozenset(
    {"id", "tenant_id", "version", "created_at", "created_by", "modified_at", "modified_by"}
)
SOFT_DELETE_COLUMNS = frozenset({"is_deleted", "deleted_at", "deleted_by"})


def _no_nul(value: str) -> str:
    # Postgres text and jsonb cannot store U+0000.
    if "\x00" in value:
        raise ValueError("text may not contain the NUL character (U+0000)")
    return value


def _json_without_nul(value: Any) -> Any:
    if isinstance(value, str):
        _no_nul(value)
    elif isinstance(value, list):
        for item in value:
            _json_without_nul(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            _no_nul(key)
            _json_without_nul(item)
    return value


def _utc_in_range(value: dt.datetime) -> dt.datetime:
    # Postgres stores years far outside 1-9999, but Python cannot read them back: such a row
    # would fail every read of its list page. A zone can push a valid local time outside.
    if value.tzinfo is not None:
        try:
            value.astimezone(dt.UTC)
        except OverflowError:
            raise ValueError("the timestamp in UTC must fall within the years 1 to 9999") from None
    return value


def _text_form(value: Any) -> Any:
    # Timestamps and dates travel as ISO 8601 text (the form the OpenAPI document states);
    # pydantic would also read a number as seconds since the epoch.
    if isinstance(value, (int, float)):
        raise ValueError("give the value as ISO 8601 text")
    return value


def _distinct(values: list[str]) -> list[str]:
    # A multi_select holds each choice at most once.
    if len(set(values)) != len(values):
        raise ValueError("each choice may appear only once")
    return values


def _known_zone(value: str) -> str:
    # The zone database decides (zoneinfo, with tzdata where the system has none).
    try:
        if value and value == value.strip():
            zoneinfo.ZoneInfo(value)
            return value
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        pass
    raise ValueError(f"{value!r} is no IANA time zone (e.g. 'Europe/Berlin', 'UTC')")


def _integral(value: Any) -> Any:
    # JSON has one number type: 3.0 is the integer 3 (JSON Schema agrees), 3.5 is none.
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


#: An integer as JSON carries it: a number without a fraction; no text, no boolean.
JsonInt = Annotated[int, BeforeValidator(_integral), Strict()]

#: A decimal as text, as the OpenAPI document states it: at most 28 digits before the point
#: and 10 after (the column is numeric(38, 10)).
DECIMAL_TEXT = r"^[+-]?(\d{1,28}(\.\d{0,10})?|\.\d{1,10})$"

Text = Annotated[str, AfterValidator(_no_nul)]
# Numbers and booleans are strict: "1" or false is no integer, 0 no boolean (the JSON types
# of the OpenAPI document); the types JSON carries as text (timestamps, dates, UUIDs,
# decimals) are read from their text.
_PY_TYPES: dict[str, Any] = {
    "long_text": Text,
    "json": Annotated[JsonValue, AfterValidator(_json_without_nul)],
    # The column types' ranges: bigint, double precision (finite), numeric(38, 10).
    "integer": Annotated[JsonInt, PydanticField(ge=-(2**63), le=2**63 - 1)],
    "number": Annotated[float, Strict(), PydanticField(allow_inf_nan=False)],
    "decimal": Annotated[
        decimal.Decimal,
        PydanticField(max_digits=38, decimal_places=10),
        WithJsonSchema(
            {
                "anyOf": [{"type": "number"}, {"type": "string", "pattern": DECIMAL_TEXT}],
                "description": "At most 28 digits before the point and 10 after it.",
            }
        ),
    ],
    "boolean": Annotated[bool, Strict()],
    "timestamp": Annotated[dt.datetime, BeforeValidator(_text_form), AfterValidator(_utc_in_range)],
    "date": Annotated[dt.date, BeforeValidator(_text_form)],
    "reference": uuid.UUID,
    "money": Annotated[Any, PlainValidator(parse_money), WithJsonSchema(MONEY_SCHEMA)],
    "located_timestamp": Annotated[
        Any, PlainValidator(parse_located), WithJsonSchema(LOCATED_SCHEMA)
    ],
    "timezone": Annotated[
        str,
        Strict(),
        StringConstraints(max_length=64),
        AfterValidator(_known_zone),
        WithJsonSchema({"type": "string", "maxLength": 64, "x-format": "iana-time-zone"}),
    ],
}


def python_type(declared: Field, model_name: str) -> Any:
    """The Python type a value of ``declared`` has after validation; ``model_name`` names
    the model of an embedded object in the OpenAPI document."""
    if declared.kind == "text":
        return Annotated[Text, StringConstraints(max_length=declared.max_length)]
    if declared.kind == "select":
        return Literal[declared.choices]
    if declared.kind == "multi_select":
        return Annotated[
            list[Literal[declared.choices]],  # type: ignore[name-defined]
            AfterValidator(_distinct),
            WithJsonSchema(
                {
                    "type": "array",
                    "items": {"enum": list(declared.choices), "type": "string"},
                    "uniqueItems": True,
                }
            ),
        ]
    if declared.kind in FILE_KINDS:
        # Written as the upload's id; the schema states the field's types and size.
        return Annotated[uuid.UUID, WithJsonSchema(file_input_schema(declared))]
    if declared.kind in ("embedded", "embedded_list"):
        model: Any = _embedded_model(declared, model_name)
        one: Any = Annotated[model, AfterValidator(_as_dict), PlainSerializer(_as_is)]
        return one if declared.kind == "embedded" else list[one]
    return _PY_TYPES[declared.kind]


def _as_is(value: Any) -> Any:
    # The value is the plain object ``_as_dict`` made, not the model.
    return value


def _as_dict(value: BaseModel) -> dict[str, Any]:
    # Stored and answered as a plain object with every field (``None`` where not given).
    return value.model_dump()


#: The model of each embedded field, built once (a field is frozen); the field is kept with
#: its model so that its id is not reused.
_EMBEDDED_MODELS: dict[tuple[int, str], tuple[Field, type[BaseModel]]] = {}


def _embedded_model(declared: Field, model_name: str) -> type[BaseModel]:
    key = (id(declared), model_name)
    found = _EMBEDDED_MODELS.get(key)
    if found is None:
        assert declared.embedded_fields is not None
        model = _model_of_fields(declared.embedded_fields, model_name, (), partial=False)
        found = _EMBEDDED_MODELS[key] = (declared, model)
    return found[1]


#: The tenant that holds the rows of shared entities (``Entity(shared=True)``): no real
#: tenant id starts with an underscore.
SHARED_TENANT = "_shared"


@dataclass(frozen=True)
class Entity:
    """A table of typed fields. Its rows are projections of its event streams."""

    table: str
    #: Its columns (a ``has_many`` passed among them moves to ``children``).
    fields: Mapping[str, Field]
    soft_delete: bool = False
    unique: tuple[tuple[str, ...], ...] = field(default=())
    #: field -> state -> the states a row may move to (see ``model.transitions``).
    transitions: Mapping[str, Mapping[str, Sequence[str]]] = field(default_factory=dict)
    #: The version its events are written with; ``upcasters`` bring the field values of
    #: older ``created``/``updated`` events to it (see ``model.versions``).
    version: int = 1
    upcasters: Mapping[int, FieldUpcaster] = field(default_factory=dict)
    #: The field whose value labels a row where another row refers to it (``_refs``).
    label_field: str | None = None
    #: How long its rows are kept and what becomes of them after (``model.retention``).
    retention: Retention | None = None
    #: Reference data every tenant reads (countries, plans, a catalogue): its rows live
    #: under ``SHARED_TENANT``, and only a ``Feature(system_scope=...)`` writes them.
    shared: bool = False
    #: Its ``has_many`` relations (``model.relations``), by name: no columns.
    children: Mapping[str, HasMany] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_table_name(self.table)
        # A has_many declared among the fields is a relation, not a column.
        relations = {n: f for n, f in self.fields.items() if isinstance(f, HasMany)}
        if relations:
            columns = {n: f for n, f in self.fields.items() if not isinstance(f, HasMany)}
            object.__setattr__(self, "fields", columns)
            object.__setattr__(self, "children", {**self.children, **relations})
        check_children(self.table, dict(self.children))
        check_versions(f"entity {self.table!r}", self.version, self.upcasters)
        for name, declared in self.fields.items():
            check_field(self, name, declared)
        # Bounds are kept in the kind's own type ("2026-01-01" as a date).
        bounded = {
            name: check_field_options(f"field {name!r} of entity {self.table!r}", declared)
            for name, declared in self.fields.items()
        }
        object.__setattr__(self, "fields", bounded)
        if self.label_field is not None and self.label_field not in self.fields:
            raise DefinitionError(
                f"entity {self.table!r}: label_field={self.label_field!r} names no field "
                f"(fields: {sorted(self.fields)})"
            )
        frozen = check_transitions(self.table, self.fields, self.transitions)
        object.__setattr__(self, "transitions", frozen)
        for index in self.unique:
            unknown = [name for name in index if name not in self.fields]
            if unknown:
                raise DefinitionError(
                    f"entity {self.table!r}: unique index {index} names unknown fields {unknown}"
                )
        check_retention(self.table, self.fields, self.soft_delete, self.retention)
        if self.shared:
            personal = sorted(name for name in self.fields if name in self.personal_fields)
            if personal:
                raise DefinitionError(
                    f"entity {self.table!r} is shared: its rows belong to no tenant and no "
                    f"person, so no field may be personal (personal: {personal}); declare "
                    "them personal=False with a reason"
                )
            if self.retention is not None:
                raise DefinitionError(
                    f"entity {self.table!r} is shared: retention runs per tenant and keeps "
                    "no shared rows; drop retention= or shared="
                )
            held = sorted(n for n, f in self.fields.items() if f.kind in FILE_KINDS)
            if held:
                raise DefinitionError(
                    f"entity {self.table!r} is shared: an uploaded file belongs to a tenant, "
                    f"so no field of a shared entity is a file or image (fields: {held})"
                )

    def field_python_type(self, name: str) -> Any:
        """The Python type a value of field ``name`` has after validation."""
        return python_type(self.fields[name], f"{_camel(self.table)}{_camel(name)}")

    def event_upcasters(self, verb: str) -> dict[int, PayloadUpcaster]:
        """The upcasters of its ``verb`` event's payload: the field values of ``created``
        (``data``) and ``updated`` (``changes``) pass through ``upcasters``; the payloads of
        the other verbs hold no fields and stay as they are."""
        key = {"created": "data", "updated": "changes"}.get(verb)
        return {
            read: _payload_upcaster(upcaster, verb, key)
            for read, upcaster in sorted(self.upcasters.items())
        }

    def retired_event_keys(self, verb: str) -> frozenset[str]:
        """The payload keys its ``verb`` events carried in older releases and readers no
        longer get: ``blind``, the blind indexes of personal values, which are now computed
        where the row is written (an index kept in the event would still match a value
        after its subject was forgotten)."""
        if verb in ("created", "updated") and self.personal_fields:
            return frozenset({"blind"})
        return frozenset()

    @functools.cached_property
    def personal_fields(self) -> frozenset[str]:
        """Names of the fields that hold personal data."""
        return frozenset(name for name, f in self.fields.items() if f.is_personal)

    def create_model(self, excluded: Collection[str] = ()) -> type[BaseModel]:
        """The pydantic model of a create payload (required fields without default required)."""
        return self._model("create", frozenset(excluded))

    def changes_model(self, excluded: Collection[str] = ()) -> type[BaseModel]:
        """The pydantic model of update changes: every field optional, none nullable if required."""
        return self._model("changes", frozenset(excluded))

    @functools.cached_property
    def _models(self) -> dict[tuple[str, frozenset[str]], type[BaseModel]]:
        return {}

    def _model(self, kind: str, excluded: frozenset[str]) -> type[BaseModel]:
        # Building a pydantic model costs about half a millisecond: build each one once.
        key = (kind, excluded)
        model = self._models.get(key)
        if model is None:
            name = f"{_camel(self.table)}{kind.capitalize()}"
            model = _build_model(self, name, excluded, partial=kind == "changes")
            self._models[key] = model
        return model


def instruction_fields(
    entity: Entity,
    verb: Literal["create", "update"] | None = None,
    excluded: Collection[str] = (),
) -> frozenset[str]:
    """The ``read_as_instruction`` fields a write can carry.

    Without a verb: every flagged field (the runtime gate intersects it with the data). For a
    standard ``update``: the flagged fields not excluded from it. For a standard ``create``: the
    flagged fields not excluded, plus excluded ones with a default (defaults are applied before
    the gate, so they are written all the same).
    """
    if verb is None:
        # Every write asks (its gate, its provenance).
        return kept(
            entity,
            "instruction_fields",
            lambda: frozenset(name for name, f in entity.fields.items() if f.read_as_instruction),
        )
    flagged = {name for name, f in entity.fields.items() if f.read_as_instruction}
    if verb == "update":
        return frozenset(flagged - set(excluded))
    return frozenset(n for n in flagged if n not in excluded or entity.fields[n].has_default)


def check_table_name(table: str) -> None:
    """Table names are lower-case snake case so they need no quoting."""
    if not table.replace("_", "a").isalnum() or not table[:1].isalpha() or table.lower() != table:
        raise DefinitionError(f"entity table {table!r} must be lower-case snake_case")


def check_field(entity: Entity, name: str, declared: Field) -> None:
    """Fail when a field declaration breaks a rule; the message names the field."""
    where = f"field {name!r} of entity {entity.table!r}"
    if name in BASE_COLUMNS or name in SOFT_DELETE_COLUMNS:
        raise DefinitionError(f"{where} shadows a base column; rename it")
    if not name.isidentifier() or name.lower() != name:
        raise DefinitionError(f"{where}: field names are lower-case snake_case identifiers")
    if declared.read_as_instruction and declared.kind not in INSTRUCTION_KINDS:
        raise DefinitionError(
            f"{where}: read_as_instruction is only allowed on text, long_text and json fields, "
            f"not on {declared.kind}"
        )
    if declared.searchable and declared.kind not in TEXT_KINDS:
        raise DefinitionError(
            f"{where}: searchable is only allowed on text and long_text fields, "
            f"not on {declared.kind}"
        )
    if declared.kind in STRUCTURED_KINDS and (declared.sortable or declared.filterable):
        raise DefinitionError(
            f"{where}: a {declared.kind} field can be neither sortable nor filterable"
        )
    if declared.kind in ("embedded", "embedded_list"):
        _check_embedded(where, declared)
    elif declared.embedded_fields is not None:
        raise DefinitionError(f"{where}: only embedded and embedded_list fields have fields")
    if declared.kind in TEXT_KINDS and declared.personal is None:
        raise DefinitionError(
            f"{where} declares no personal-data stance; pass personal=False, reason='...' "
            "or personal='self' | 'tenant' | {'of': '<field>'}"
        )
    if declared.personal is False and not (declared.reason and declared.reason.strip()):
        raise DefinitionError(f"{where}: personal=False needs a non-empty reason='...'")
    if declared.is_personal and (declared.sortable or declared.searchable):
        # Personal values are stored encrypted: only equality (a blind index) can be asked.
        option = "sortable" if declared.sortable else "searchable"
        raise DefinitionError(
            f"{where} is personal data (stored encrypted) and cannot be {option}; drop "
            f"{option}=True (filterable=True still finds equal values), or declare "
            "personal=False, reason='...' if it is not personal data"
        )
    if isinstance(declared.personal, Mapping):
        subject = declared.personal.get("of")
        if set(declared.personal) != {"of"} or subject not in entity.fields:
            raise DefinitionError(
                f"{where}: personal={{'of': ...}} must name another field of the entity, "
                f"got {dict(declared.personal)!r}"
            )
    elif declared.personal not in (None, False, "self", "tenant"):
        raise DefinitionError(
            f"{where}: unknown personal stance {declared.personal!r}; use personal='self' (the "
            "row is about the person it holds), personal='tenant' (about the tenant), "
            "personal={'of': '<field>'} (about the subject another field names), or "
            "personal=False, reason='...' (not personal data)"
        )
    check_field_access(declared.read, "read", where)
    check_field_access(declared.write, "write", where)
    if declared.kind in ("select", "multi_select") and not declared.choices:
        raise DefinitionError(f"{where}: a {declared.kind} field needs at least one choice")
    if declared.kind == "multi_select" and len(set(declared.choices)) != len(declared.choices):
        raise DefinitionError(f"{where}: its choices repeat a value")
    if declared.kind == "reference":
        if declared.on_delete not in (None, "restrict"):
            raise DefinitionError(
                f"{where}: on_delete={declared.on_delete!r} is unknown; use "
                "on_delete='restrict' (refuse deleting a referenced row) or leave it out"
            )
    elif declared.label_field is not None or declared.on_delete is not None:
        raise DefinitionError(
            f"{where}: label_field= and on_delete= apply to reference fields only, "
            f"not to a {declared.kind} field"
        )
    if declared.kind == "text" and (declared.max_length or 0) < 1:
        raise DefinitionError(f"{where}: max_length must be at least 1")
    check_file_options(where, declared)


def _check_embedded(where: str, declared: Field) -> None:
    """An embedded object's fields: plain values under the embedded field's own stance."""
    inner = declared.embedded_fields
    if not inner:
        raise DefinitionError(f"{where}: an {declared.kind} field needs at least one field")
    holds_text = False
    for name, sub in inner.items():
        here = f"{where}, embedded field {name!r}"
        if not isinstance(sub, Field):
            raise DefinitionError(f"{here}: declare it with fields.<kind>(...)")
        if not name.isidentifier() or name.lower() != name:
            raise DefinitionError(f"{here}: field names are lower-case snake_case identifiers")
        if sub.kind not in EMBEDDABLE_KINDS:
            raise DefinitionError(
                f"{here}: a {sub.kind} field cannot be embedded; use one of "
                f"{', '.join(sorted(EMBEDDABLE_KINDS))}"
            )
        if sub.personal is not None or sub.read is not None or sub.write is not None:
            raise DefinitionError(
                f"{here}: personal=, read= and write= are declared on the embedded field "
                "itself, for all its fields"
            )
        if sub.sortable or sub.filterable or sub.searchable or sub.read_as_instruction:
            raise DefinitionError(
                f"{here}: an embedded field is not sortable, filterable, searchable or "
                "read as an instruction"
            )
        if sub.kind == "text" and (sub.max_length or 0) < 1:
            raise DefinitionError(f"{here}: max_length must be at least 1")
        if sub.kind in ("select", "multi_select") and not sub.choices:
            raise DefinitionError(f"{here}: a {sub.kind} field needs at least one choice")
        holds_text = holds_text or sub.kind in TEXT_KINDS
    if holds_text and declared.personal is None:
        raise DefinitionError(
            f"{where} holds text and declares no personal-data stance; pass personal=False, "
            "reason='...' or personal='self' | 'tenant' | {'of': '<field>'}"
        )


def _payload_upcaster(upcaster: FieldUpcaster, verb: str, key: str | None) -> PayloadUpcaster:
    def upcast(payload: dict[str, Any]) -> dict[str, Any]:
        if key is None or key not in payload:
            return payload
        return {**payload, key: upcaster(dict(payload[key]), verb)}

    return upcast


def _camel(table: str) -> str:
    return "".join(part.capitalize() for part in table.split("_"))


def _build_model(
    entity: Entity, model_name: str, excluded: Collection[str], *, partial: bool
) -> type[BaseModel]:
    model = _model_of_fields(
        entity.fields, model_name, excluded, partial=partial, prefix=_camel(entity.table)
    )
    nested = {
        name: relation
        for name, relation in entity.children.items()
        if relation.nested and not partial and name not in excluded
    }
    if not nested:
        return model
    # A create's nested children: each the child's create payload without its parent.
    definitions: dict[str, Any] = {
        name: (
            list[relation.entity.create_model(excluded=(relation.via,))] | None,  # type: ignore[misc]
            PydanticField(
                default=None,
                max_length=MAX_NESTED_CHILDREN,
                description=relation.description
                or f"rows of {relation.entity.table!r} created with this one",
            ),
        )
        for name, relation in nested.items()
    }
    built: type[BaseModel] = create_model(model_name, __base__=model, **definitions)
    return built


def _model_of_fields(
    fields: Mapping[str, Field],
    model_name: str,
    excluded: Collection[str],
    *,
    partial: bool,
    prefix: str | None = None,
) -> type[BaseModel]:
    definitions: dict[str, Any] = {}
    for name, declared in fields.items():
        if name in excluded:
            continue
        field_type = python_type(declared, f"{prefix or model_name}{_camel(name)}")
        extra: dict[str, JsonValue] = {}
        if declared.is_personal:
            extra["x-personal"] = True
        if declared.read_as_instruction:
            extra["x-read-as-instruction"] = True
        # Field access rules, for the OpenAPI document (see ``service.field_access``).
        if declared.read is not None:
            extra["x-asanoha-read"] = declared.read.describe()
        if declared.write is not None:
            extra["x-asanoha-write"] = declared.write.describe()
        extra.update(json_schema_of(declared))
        info = PydanticField(description=declared.description, json_schema_extra=extra or None)
        if declared.required and not partial and not declared.has_default:
            definitions[name] = (field_type, info)
        elif declared.required:
            # Optional to send, but never null: an omitted value is simply not set.
            definitions[name] = (field_type, _with_default(info, None))
        else:
            definitions[name] = (field_type | None, _with_default(info, None))
    model: type[BaseModel] = create_model(
        model_name, __config__=ConfigDict(extra="forbid"), **definitions
    )
    return model


def _with_default(info: Any, default: Any) -> Any:
    return PydanticField(
        default=default,
        description=info.description,
        json_schema_extra=info.json_schema_extra,
    )
