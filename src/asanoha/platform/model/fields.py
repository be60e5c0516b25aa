"""Field declarations of an entity: ``fields.text(...)``, ``fields.integer(...)``, ...

Constructors record what was declared; the entity checks the declarations (it knows the field
names, so its errors can name them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from asanoha.platform.errors import DefinitionError
from asanoha.platform.model import relations
from asanoha.platform.model.access import Access
from asanoha.platform.model.sync_callables import check_not_async

FieldKind = Literal[
    "text",
    "long_text",
    "json",
    "integer",
    "number",
    "decimal",
    "boolean",
    "select",
    "timestamp",
    "date",
    "reference",
    "multi_select",
    "timezone",
    "money",
    "embedded",
    "embedded_list",
    "located_timestamp",
    "file",
    "image",
]
#: ``False`` (with a reason), the subject themself, the tenant, or the subject named by a field.
PersonalStance = Literal[False, "self", "tenant"] | Mapping[str, str] | None

#: A domain event's personal fields and their stance (``feature.event(..., pii={...})``).
EventPii = Literal["none"] | Mapping[str, PersonalStance]

TEXT_KINDS: frozenset[str] = frozenset({"text", "long_text"})
INSTRUCTION_KINDS: frozenset[str] = frozenset({"text", "long_text", "json"})
DEFAULT_TEXT_LENGTH = 200
#: The kinds ``min=``/``max=`` bound (their values are ordered).
ORDERED_KINDS: frozenset[str] = frozenset({"integer", "number", "decimal", "date", "timestamp"})
#: The kinds whose values are lists (``min_items=``/``max_items=`` bound them).
LIST_KINDS: frozenset[str] = frozenset({"multi_select", "embedded_list"})
#: The kinds whose values are JSON objects or lists: neither sortable nor filterable.
STRUCTURED_KINDS: frozenset[str] = frozenset(
    {"multi_select", "money", "embedded", "embedded_list", "located_timestamp", "file", "image"}
)
#: The kinds whose value is an uploaded file (``POST /api/files``), written as its id.
FILE_KINDS: frozenset[str] = frozenset({"file", "image"})
#: The kinds a field of an embedded object may have.
EMBEDDABLE_KINDS: frozenset[str] = frozenset(
    {
        "text",
        "long_text",
        "integer",
        "number",
        "decimal",
        "boolean",
        "select",
        "multi_select",
        "date",
        "timestamp",
        "timezone",
        "money",
        "located_timestamp",
    }
)
#: What ``format=`` on a text field checks.
TextFormat = Literal["email", "url", "phone"]
TEXT_FORMATS: frozenset[str] = frozenset({"email", "url", "phone"})
#: What deleting a referenced row does: ``"restrict"`` refuses it while live rows refer to
#: it (409 ``delete_restricted``); ``None`` lets the reference dangle.
OnDelete = Literal["restrict"] | None


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


@dataclass(frozen=True)
class Field:
    """One declared field."""

    kind: FieldKind
    required: bool = False
    default: Any = MISSING
    sortable: bool = False
    filterable: bool = False
    #: Matched by a list's ``search=`` (text and long_text fields only).
    searchable: bool = False
    read_as_instruction: bool = False
    personal: PersonalStance = None
    reason: str | None = None
    max_length: int | None = None
    choices: tuple[str, ...] = ()
    references: str | None = None
    #: A reference's label in ``_refs``: this field of the referenced row (else the
    #: referenced entity's ``label_field``).
    label_field: str | None = None
    on_delete: OnDelete = None
    #: A text field's format (checked at write, stated in the OpenAPI document).
    format: TextFormat | None = None
    #: Bounds of an ordered value (a number, date or timestamp), both inclusive.
    min: Any = None
    max: Any = None
    #: Bounds of a list's length.
    min_items: int | None = None
    max_items: int | None = None
    #: The fields of an ``embedded`` object (of each item of an ``embedded_list``).
    embedded_fields: Mapping[str, Field] | None = None
    #: A file field's largest accepted content, in bytes (``None``: the upload limit).
    max_size: int | None = None
    #: A file field's accepted content types: ``"application/pdf"``, ``"image/*"``
    #: (empty: any type).
    types: tuple[str, ...] = ()
    description: str | None = None
    #: Who may read the field: others get rows without it. ``None``: whoever reads the row.
    read: Access | None = None
    #: Who may write the field: others are refused (403 ``field_write_denied``). ``None``:
    #: whoever writes the row.
    write: Access | None = None

    @property
    def has_default(self) -> bool:
        """Whether a default is applied on create."""
        return self.default is not MISSING

    @property
    def is_personal(self) -> bool:
        """Whether values of this field are personal data."""
        return self.personal not in (None, False)


def _field(kind: FieldKind, **options: Any) -> Field:
    default = options.get("default", MISSING)
    if callable(default):
        check_not_async(
            default, f"fields.{kind}(default=...)", "default", "a default is applied in the create"
        )
    return Field(kind=kind, **options)


def text(
    *,
    max_length: int = DEFAULT_TEXT_LENGTH,
    required: bool = False,
    default: Any = MISSING,
    sortable: bool = False,
    filterable: bool = False,
    searchable: bool = False,
    read_as_instruction: bool = False,
    personal: PersonalStance = None,
    reason: str | None = None,
    description: str | None = None,
    read: Access | None = None,
    write: Access | None = None,
    format: TextFormat | None = None,
) -> Field:
    """A short text (at most ``max_length`` characters, 200 by default); ``format=`` checks
    it is an email address, an http(s) URL or an international phone number."""
    return _field(
        "text",
        format=format,
        max_length=max_length,
        required=required,
        default=default,
        sortable=sortable,
        filterable=filterable,
        searchable=searchable,
        read_as_instruction=read_as_instruction,
        personal=personal,
        reason=reason,
        description=description,
        read=read,
        write=write,
    )


def long_text(
    *,
    required: bool = False,
    default: Any = MISSING,
    searchable: bool = False,
    read_as_instruction: bool = False,
    personal: PersonalStance = None,
    reason: str | None = None,
    description: str | None = None,
    read: Access | None = None,
    write: Access | None = None,
) -> Field:
    """A text of any length; not sortable or filterable."""
    return _field(
        "long_text",
        required=required,
        default=default,
        searchable=searchable,
        read_as_instruction=read_as_instruction,
        personal=personal,
        reason=reason,
        description=description,
        read=read,
        write=write,
    )


def json(
    *,
    required: bool = False,
    default: Any = MISSING,
    read_as_instruction: bool = False,
    personal: PersonalStance = None,
    reason: str | None = None,
    description: str | None = None,
    read: Access | None = None,
    write: Access | None = None,
) -> Field:
    """Any JSON value."""
    return _field(
        "json",
        required=required,
        default=default,
        read_as_instruction=read_as_instruction,
        personal=personal,
        reason=reason,
        description=description,
        read=read,
        write=write,
    )


def _scalar(kind: FieldKind) -> Any:
    def build(
        *,
        required: bool = False,
        default: Any = MISSING,
        sortable: bool = False,
        filterable: bool = False,
        read_as_instruction: bool = False,
        personal: PersonalStance = None,
        reason: str | None = None,
        description: str | None = None,
        read: Access | None = None,
        write: Access | None = None,
        min: Any = None,
        max: Any = None,
        format: TextFormat | None = None,
    ) -> Field:
        # ``format=`` is taken by every constructor so that a misplaced one is refused by
        # the entity's check, naming the field, rather than as an unknown argument.
        return _field(
            kind,
            min=min,
            max=max,
            format=format,
            required=required,
            default=default,
            sortable=sortable,
            filterable=filterable,
            read_as_instruction=read_as_instruction,
            personal=personal,
            reason=reason,
            description=description,
            read=read,
            write=write,
        )

    build.__name__ = kind
    build.__doc__ = f"A {kind.replace('_', ' ')} field."
    return build


integer = _scalar("integer")
number = _scalar("number")
decimal = _scalar("decimal")
boolean = _scalar("boolean")
timestamp = _scalar("timestamp")
date = _scalar("date")


def select(
    choices: Sequence[str],
    *,
    required: bool = False,
    default: Any = MISSING,
    sortable: bool = False,
    filterable: bool = False,
    description: str | None = None,
    read_as_instruction: bool = False,
    read: Access | None = None,
    write: Access | None = None,
) -> Field:
    """One of ``choices``."""
    return _field(
        "select",
        choices=tuple(choices),
        required=required,
        default=default,
        sortable=sortable,
        filterable=filterable,
        description=description,
        read_as_instruction=read_as_instruction,
        read=read,
        write=write,
    )


def multi_select(
    choices: Sequence[str],
    *,
    required: bool = False,
    default: Any = MISSING,
    min_items: int | None = None,
    max_items: int | None = None,
    description: str | None = None,
    read: Access | None = None,
    write: Access | None = None,
) -> Field:
    """A list of distinct values out of ``choices`` (stored as a JSON list)."""
    return _field(
        "multi_select",
        choices=tuple(choices),
        required=required,
        default=default,
        min_items=min_items,
        max_items=max_items,
        description=description,
        read=read,
        write=write,
    )


def timezone(
    *,
    required: bool = False,
    default: Any = MISSING,
    filterable: bool = False,
    description: str | None = None,
    read: Access | None = None,
    write: Access | None = None,
) -> Field:
    """An IANA time zone name (``Europe/Berlin``), checked against the zone database."""
    return _field(
        "timezone",
        required=required,
        default=default,
        filterable=filterable,
        description=description,
        read=read,
        write=write,
    )


def money(
    *,
    required: bool = False,
    default: Any = MISSING,
    min: Any = None,
    max: Any = None,
    description: str | None = None,
    read: Access | None = None,
    write: Access | None = None,
) -> Field:
    """An amount in a currency: ``{"amount": "12.34", "currency": "EUR"}`` on the wire,
    minor units and the currency in the column (see ``model.money``). ``min=``/``max=``
    bound the amount (decimal text), whatever the currency."""
    return _field(
        "money",
        required=required,
        default=default,
        min=min,
        max=max,
        description=description,
        read=read,
        write=write,
    )


def located_timestamp(
    *,
    required: bool = False,
    default: Any = MISSING,
    min: Any = None,
    max: Any = None,
    description: str | None = None,
    read: Access | None = None,
    write: Access | None = None,
) -> Field:
    """An instant with its zone: ``{"at": "<wall-clock time>", "tz": "<IANA zone>"}`` in,
    ``{"at", "tz", "utc"}`` out (see ``model.located_time``); ``min=``/``max=`` bound the
    instant."""
    return _field(
        "located_timestamp",
        required=required,
        default=default,
        min=min,
        max=max,
        description=description,
        read=read,
        write=write,
    )


def embedded(
    of: Mapping[str, Field],
    *,
    required: bool = False,
    default: Any = MISSING,
    personal: PersonalStance = None,
    reason: str | None = None,
    description: str | None = None,
    read: Access | None = None,
    write: Access | None = None,
) -> Field:
    """A typed object with the fields ``of`` (stored as JSON, replaced whole on update).
    Its own fields state no personal stance: the embedded field states it for all of them
    (needed when one is text)."""
    return _field(
        "embedded",
        embedded_fields=dict(of),
        required=required,
        default=default,
        personal=personal,
        reason=reason,
        description=description,
        read=read,
        write=write,
    )


def embedded_list(
    of: Mapping[str, Field],
    *,
    required: bool = False,
    default: Any = MISSING,
    min_items: int | None = None,
    max_items: int | None = None,
    personal: PersonalStance = None,
    reason: str | None = None,
    description: str | None = None,
    read: Access | None = None,
    write: Access | None = None,
) -> Field:
    """A list of typed objects with the fields ``of`` (see ``embedded``)."""
    return _field(
        "embedded_list",
        embedded_fields=dict(of),
        required=required,
        default=default,
        min_items=min_items,
        max_items=max_items,
        personal=personal,
        reason=reason,
        description=description,
        read=read,
        write=write,
    )


def reference(
    entity: str,
    *,
    label_field: str | None = None,
    on_delete: OnDelete = None,
    required: bool = False,
    filterable: bool = False,
    description: str | None = None,
    read_as_instruction: bool = False,
    read: Access | None = None,
    write: Access | None = None,
) -> Field:
    """The id of a row of another entity (``"<feature>:<entity>"``, or ``"<entity>"`` of the
    same feature), which must exist in the caller's tenant when written. Lists and details
    answer ``_refs``: each referenced id with the value of ``label_field`` (here, or the
    referenced entity's). ``on_delete="restrict"``: the referenced row cannot be deleted
    while live rows refer to it."""
    return _field(
        "reference",
        references=entity,
        label_field=label_field,
        on_delete=on_delete,
        required=required,
        filterable=filterable,
        description=description,
        read_as_instruction=read_as_instruction,
        read=read,
        write=write,
    )


def file(
    *,
    required: bool = False,
    max_size: int | None = None,
    types: Sequence[str] | None = None,
    description: str | None = None,
    read: Access | None = None,
    write: Access | None = None,
) -> Field:
    """An uploaded file (``POST /api/files``): written as the id the upload answered, which
    must name a file of the caller's tenant of at most ``max_size`` bytes whose content type
    matches one of ``types`` (``"application/pdf"``, ``"image/*"``; unset: any). Read as
    ``{"id", "name", "content_type", "size", "sha256", "url"}``, ``url`` a short-lived
    signed download link minted for a caller who may read the field of the row."""
    return _field(
        "file",
        max_size=max_size,
        types=tuple(types) if types is not None else (),
        required=required,
        description=description,
        read=read,
        write=write,
    )


def image(
    *,
    required: bool = False,
    max_size: int | None = None,
    types: Sequence[str] | None = None,
    description: str | None = None,
    read: Access | None = None,
    write: Access | None = None,
) -> Field:
    """An uploaded image: a ``file`` whose content is a PNG, JPEG, GIF or WebP image (its
    leading bytes are checked at upload), ``types`` narrowing those (default: all four)."""
    return _field(
        "image",
        max_size=max_size,
        types=tuple(types) if types is not None else (),
        required=required,
        description=description,
        read=read,
        write=write,
    )


def check_event_pii(qn: str, model: Any, pii: Any) -> EventPii:
    """A domain event's ``pii=``: ``"none"``, or a map of its personal fields to their stance
    (``"self"``: the event's stream; ``"tenant"``; ``{"of": "<field>"}``: the subject another
    field of the payload names)."""
    if pii == "none":
        return "none"
    remedy = (
        "pass pii={'<field>': 'self' | 'tenant' | {'of': '<field>'}, ...} naming each personal "
        "field of the payload and whose data it is"
    )
    if not isinstance(pii, Mapping) or not pii:
        raise DefinitionError(f"event {qn!r}: pii={pii!r} names no field; {remedy}")
    declared = getattr(model, "model_fields", None)
    for name, stance in pii.items():
        if declared is not None and name not in declared:
            raise DefinitionError(
                f"event {qn!r}: pii names {name!r}, which its payload model does not have "
                f"(fields: {sorted(declared)})"
            )
        if isinstance(stance, Mapping):
            named = stance.get("of")
            if set(stance) != {"of"} or (declared is not None and named not in declared):
                raise DefinitionError(
                    f"event {qn!r}: pii[{name!r}]={dict(stance)!r} must be {{'of': '<field>'}} "
                    "naming another field of the payload"
                )
        elif stance not in ("self", "tenant"):
            raise DefinitionError(f"event {qn!r}: pii[{name!r}]={stance!r} is no stance; {remedy}")
    return dict(pii)


#: ``fields.has_many(child_entity, via="<reference field>", nested=False)``: see
#: ``model.relations`` (a relation, not a column).
has_many = relations.has_many
