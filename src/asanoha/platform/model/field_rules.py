"""Field options that bound a value: ``format=`` (text), ``min=``/``max=`` (numbers, dates,
timestamps) and ``min_items=``/``max_items=`` (lists).

Two checks live here: ``check_field_options`` refuses a declaration that cannot work (when
the feature registers the entity, naming feature, entity and field), and ``check_values``
refuses a written value outside its bounds (422 ``field_rule_failed``, naming the field).
The executor runs the second before the event is appended; the OpenAPI document and the MCP
tool schemas state the same bounds (``json_schema_of``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pydantic

from asanoha.platform.errors import DefinitionError, Reasons, UnprocessableError
from asanoha.platform.model.fields import LIST_KINDS, ORDERED_KINDS, TEXT_FORMATS, Field
from asanoha.platform.model.kept import kept
from asanoha.platform.model.located_time import LocatedValue, instant_of
from asanoha.platform.model.money import MoneyValue, amount_of

if TYPE_CHECKING:
    from asanoha.platform.model.entity import Entity

#: The kinds ``min=``/``max=`` bound: ordered values, a money amount, a located instant.
BOUNDED_KINDS = ORDERED_KINDS | {"money", "located_timestamp"}

#: An international phone number (E.164: a plus, a country code, at most 15 digits), with
#: spaces, dots, hyphens and parentheses allowed between the digits.
_PHONE = re.compile(r"^\+[1-9][0-9]{6,14}$")
_PHONE_SEPARATORS = re.compile(r"[\s().-]")
_URL: pydantic.TypeAdapter[pydantic.AnyHttpUrl] = pydantic.TypeAdapter(pydantic.AnyHttpUrl)

#: The Python type a bound of each ordered kind must have.
_BOUND_TYPES: dict[str, tuple[type, ...]] = {
    "integer": (int,),
    "number": (int, float),
    "decimal": (int, decimal.Decimal, str),
    "date": (dt.date, str),
    "timestamp": (dt.datetime, str),
    "money": (int, decimal.Decimal, str),
    "located_timestamp": (dt.datetime, str),
}


def has_rules(declared: Field) -> bool:
    """Whether ``declared`` has a bound that a write must be checked against."""
    inner = declared.embedded_fields or {}
    return any(has_rules(sub) for sub in inner.values()) or bool(
        declared.format
        or declared.min is not None
        or declared.max is not None
        or declared.min_items is not None
        or declared.max_items is not None
    )


def check_field_options(where: str, declared: Field) -> Field:
    """``declared`` with its bounds in the kind's own type; ``DefinitionError`` starting
    with ``where`` (feature, entity, field) when an option does not fit the kind."""
    kind = declared.kind
    if declared.format is not None:
        if kind != "text":
            raise DefinitionError(
                f"{where}: format= applies to text fields only, not to a {kind} field"
            )
        if declared.format not in TEXT_FORMATS:
            raise DefinitionError(
                f"{where}: format={declared.format!r} is unknown; use one of {sorted(TEXT_FORMATS)}"
            )
    low, high = declared.min, declared.max
    if (low is not None or high is not None) and kind not in BOUNDED_KINDS:
        raise DefinitionError(
            f"{where}: min=/max= apply to {', '.join(sorted(BOUNDED_KINDS))} fields, "
            f"not to a {kind} field"
        )
    low, high = _bound(where, kind, "min", low), _bound(where, kind, "max", high)
    if low is not None and high is not None and low > high:
        raise DefinitionError(f"{where}: min={declared.min!r} is greater than max={declared.max!r}")
    fewest, most = declared.min_items, declared.max_items
    if (fewest is not None or most is not None) and kind not in LIST_KINDS:
        raise DefinitionError(
            f"{where}: min_items=/max_items= apply to {', '.join(sorted(LIST_KINDS))} fields, "
            f"not to a {kind} field"
        )
    for option, count in (("min_items", fewest), ("max_items", most)):
        if count is not None and (isinstance(count, bool) or not isinstance(count, int)):
            raise DefinitionError(f"{where}: {option}= takes a whole number, not {count!r}")
        if count is not None and count < 0:
            raise DefinitionError(f"{where}: {option}={count} must not be negative")
    if fewest is not None and most is not None and fewest > most:
        raise DefinitionError(f"{where}: min_items={fewest} is greater than max_items={most}")
    if kind == "multi_select" and fewest is not None and fewest > len(declared.choices):
        raise DefinitionError(
            f"{where}: min_items={fewest} exceeds its {len(declared.choices)} choices"
        )
    inner = declared.embedded_fields
    if inner is not None:
        inner = {
            name: check_field_options(f"{where}, embedded field {name!r}", sub)
            for name, sub in inner.items()
        }
    return dataclasses.replace(declared, min=low, max=high, embedded_fields=inner)


def _bound(where: str, kind: str, option: str, value: Any) -> Any:
    """A declared bound in the kind's own type (dates and decimals may be given as text)."""
    if value is None:
        return None
    allowed = _BOUND_TYPES[kind]
    if isinstance(value, bool) or not isinstance(value, allowed):
        raise DefinitionError(
            f"{where}: {option}={value!r} is no {kind} value; give a "
            + " or ".join(t.__name__ for t in allowed)
        )
    try:
        if kind in ("decimal", "money"):
            return decimal.Decimal(str(value))
        if kind == "date" and isinstance(value, str):
            return dt.date.fromisoformat(value)
        if kind in ("timestamp", "located_timestamp") and isinstance(value, str):
            value = dt.datetime.fromisoformat(value)
    except (ValueError, decimal.InvalidOperation):
        raise DefinitionError(f"{where}: {option}={value!r} is no {kind} value") from None
    if kind in ("timestamp", "located_timestamp") and value.tzinfo is None:
        raise DefinitionError(f"{where}: {option}={value!r} needs a time zone (e.g. +00:00)")
    return value


def bounded_fields(entity: Entity) -> frozenset[str]:
    """The fields of ``entity`` that have a bound (``has_rules``): an entity without any
    has nothing for ``check_values`` to check. Kept with the frozen definition: every
    create and update asks."""
    return kept(
        entity,
        "bounded_fields",
        lambda: frozenset(name for name, declared in entity.fields.items() if has_rules(declared)),
    )


def check_values(entity_key: str, fields: Mapping[str, Field], values: Mapping[str, Any]) -> None:
    """Refuse (422 ``field_rule_failed``) the first value of ``values`` outside its field's
    bounds; ``None`` (no value) is bounded by ``required``, not here."""
    for name, value in values.items():
        declared = fields.get(name)
        if declared is None or value is None or not has_rules(declared):
            continue
        found = _problem(declared, value)
        if found is not None:
            path, (rule, limit, message) = found
            raise UnprocessableError(
                Reasons.FIELD_RULE_FAILED,
                entity=entity_key,
                field=".".join([name, *path]),
                rule=rule,
                limit=limit,
                problem=message,
            )


Problem = tuple[str, Any, str]


def _problem(declared: Field, value: Any) -> tuple[list[str], Problem] | None:
    """The first broken rule of ``value`` with its path below the field, or ``None``."""
    own = _own_problem(declared, value)
    if own is not None:
        return [], own
    inner = declared.embedded_fields
    if inner is None:
        return None
    items = [value] if declared.kind == "embedded" else value
    for index, item in enumerate(items):
        for name, sub in inner.items():
            sub_value = item.get(name)
            if sub_value is None or not has_rules(sub):
                continue
            found = _problem(sub, sub_value)
            if found is not None:
                where = [name] if declared.kind == "embedded" else [str(index), name]
                return [*where, *found[0]], found[1]
    return None


def _comparable(declared: Field, value: Any) -> Any:
    if declared.kind == "money":
        money: MoneyValue = value
        return amount_of(money)
    if declared.kind == "located_timestamp":
        located: LocatedValue = value
        return instant_of(located)
    return value


def _own_problem(declared: Field, value: Any) -> Problem | None:
    if declared.format is not None and isinstance(value, str):
        message = _format_problem(declared.format, value)
        if message is not None:
            return "format", declared.format, message
    if declared.min is not None and _comparable(declared, value) < declared.min:
        return "min", _shown(declared.min), f"must be at least {_shown(declared.min)}"
    if declared.max is not None and _comparable(declared, value) > declared.max:
        return "max", _shown(declared.max), f"must be at most {_shown(declared.max)}"
    if declared.min_items is not None and len(value) < declared.min_items:
        return "min_items", declared.min_items, f"needs at least {declared.min_items} items"
    if declared.max_items is not None and len(value) > declared.max_items:
        return "max_items", declared.max_items, f"takes at most {declared.max_items} items"
    return None


def _format_problem(format: str, value: str) -> str | None:
    if format == "email":
        # Imported on the first email checked: it compiles its patterns when imported, which
        # every command that loads an application would pay.
        from email_validator import EmailNotValidError, validate_email

        try:
            validate_email(value, check_deliverability=False)
        except EmailNotValidError as error:
            return f"is no email address: {error}"
        return None
    if format == "url":
        try:
            _URL.validate_python(value)
        except pydantic.ValidationError:
            return "is no http(s) URL"
        return None
    if not _PHONE.match(_PHONE_SEPARATORS.sub("", value)):
        return "is no international phone number (+<country code><number>, at most 15 digits)"
    return None


def _shown(bound: Any) -> Any:
    if isinstance(bound, dt.date | decimal.Decimal):
        return bound.isoformat() if isinstance(bound, dt.date) else str(bound)
    return bound


def json_schema_of(declared: Field) -> dict[str, Any]:
    """The JSON Schema keywords that state ``declared``'s bounds (OpenAPI, MCP tools)."""
    schema: dict[str, Any] = {}
    if declared.format == "email":
        schema["format"] = "email"
    elif declared.format == "url":
        schema["format"] = "uri"
    elif declared.format == "phone":
        schema["x-format"] = "phone"
    numeric = declared.kind in ("integer", "number")
    for option, keyword in (("min", "minimum"), ("max", "maximum")):
        bound = getattr(declared, option)
        if bound is None:
            continue
        if numeric:
            schema[keyword] = bound
        else:
            # Dates, timestamps and decimal text: JSON Schema bounds only numbers.
            schema[f"x-{keyword}"] = _shown(bound)
    if declared.min_items is not None:
        schema["minItems"] = declared.min_items
    if declared.max_items is not None:
        schema["maxItems"] = declared.max_items
    return schema
