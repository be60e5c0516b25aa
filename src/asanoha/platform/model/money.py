"""Money values: an amount in a currency, as the API carries it and as columns store it.

The API takes and answers ``{"amount": "12.34", "currency": "EUR"}``: the amount is decimal
text (a JSON number would pass through binary floating point), the currency an ISO 4217 code.
An amount may have at most as many decimal places as its currency has minor units (2 for EUR,
0 for JPY, 3 for KWD; from CLDR through Babel) and is answered with exactly that many. The
column stores the amount in minor units with the currency (``{"minor": 1234, "currency":
"EUR"}``), so sums over a currency are exact integers.
"""

from __future__ import annotations

import decimal
import functools
import re
from typing import Any, TypedDict

#: Decimal text with at most 15 digits before the point (minor units fit a bigint).
AMOUNT_TEXT = r"^-?[0-9]{1,15}(\.[0-9]{1,4})?$"
_AMOUNT = re.compile(AMOUNT_TEXT)
CURRENCY_TEXT = r"^[A-Z]{3}$"


class MoneyValue(TypedDict):
    """A money value as the API carries it."""

    amount: str
    currency: str


class StoredMoney(TypedDict):
    """A money value as its column stores it."""

    minor: int
    currency: str


@functools.cache
def currencies() -> frozenset[str]:
    """The ISO 4217 codes known to CLDR (current and historical)."""
    # Imported when first asked (babel's tables are large): loading an application without
    # money fields does not pay for it.
    from babel.numbers import list_currencies

    return frozenset(list_currencies())


@functools.cache
def minor_digits(currency: str) -> int:
    """How many decimal places an amount in ``currency`` has (EUR 2, JPY 0, KWD 3)."""
    from babel.numbers import get_currency_precision

    return int(get_currency_precision(currency))


def parse_money(value: Any) -> MoneyValue:
    """``value`` checked and in its canonical form (the currency's number of decimal
    places); ``ValueError`` saying what is wrong."""
    if not isinstance(value, dict) or set(value) != {"amount", "currency"}:
        raise ValueError('give money as {"amount": "12.34", "currency": "EUR"}')
    amount, currency = value["amount"], value["currency"]
    if not isinstance(currency, str) or currency not in currencies():
        raise ValueError(f"{currency!r} is no ISO 4217 currency code (e.g. 'EUR', 'JPY')")
    if not isinstance(amount, str) or not _AMOUNT.match(amount):
        raise ValueError(
            f"the amount {amount!r} must be decimal text such as '12.34' "
            "(at most 15 digits before the point)"
        )
    digits = minor_digits(currency)
    exact = decimal.Decimal(amount)
    if exact != exact.quantize(decimal.Decimal(1).scaleb(-digits)):
        raise ValueError(f"{currency} amounts have at most {digits} decimal places")
    return {"amount": _text(exact, digits), "currency": currency}


def to_stored(value: MoneyValue) -> StoredMoney:
    """The column's form of a canonical ``value``."""
    digits = minor_digits(value["currency"])
    minor = decimal.Decimal(value["amount"]).scaleb(digits)
    return {"minor": int(minor), "currency": value["currency"]}


def from_stored(stored: StoredMoney) -> MoneyValue:
    """The API's form of a column's value."""
    digits = minor_digits(stored["currency"])
    amount = decimal.Decimal(stored["minor"]).scaleb(-digits)
    return {"amount": _text(amount, digits), "currency": stored["currency"]}


def amount_of(value: MoneyValue) -> decimal.Decimal:
    """The amount of a canonical value, for comparing it with a bound."""
    return decimal.Decimal(value["amount"])


def _text(amount: decimal.Decimal, digits: int) -> str:
    return f"{amount:.{digits}f}"


#: The JSON schema of a money value (OpenAPI, MCP tools).
MONEY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "amount": {"type": "string", "pattern": AMOUNT_TEXT},
        "currency": {"type": "string", "pattern": CURRENCY_TEXT},
    },
    "required": ["amount", "currency"],
    "additionalProperties": False,
}
