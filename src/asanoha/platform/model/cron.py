"""The shape of a ``cron=`` expression, checked when the job is declared.

Beat parses the expression with Celery's ``crontab`` when it starts; this check catches the
common mistakes (a field too many or too few, a value out of range, a stray character) at
import time, in the process that declares the job, with the job's name in the message.
"""

from __future__ import annotations

import re

from asanoha.platform.errors import DefinitionError

#: Each field's name and the range of its numbers.
FIELDS: tuple[tuple[str, int, int], ...] = (
    ("minute", 0, 59),
    ("hour", 0, 23),
    ("day-of-month", 1, 31),
    ("month", 1, 12),
    ("day-of-week", 0, 6),
)
#: One item of a field: ``*``, ``N``, ``N-M`` or a name (``mon``, ``jan``), with ``/step``.
_ITEM = re.compile(r"^(\*|[0-9]+|[0-9]+-[0-9]+|[a-z]{3}|[a-z]{3}-[a-z]{3})(/[0-9]+)?$")


def check_cron(expression: str, qn: str) -> None:
    """Raise ``DefinitionError`` naming ``qn`` unless ``expression`` is a five-field crontab."""
    if not isinstance(expression, str):
        raise DefinitionError(f"{qn}: cron must be a string such as '30 2 * * *'")
    parts = expression.split()
    if len(parts) != len(FIELDS):
        raise DefinitionError(
            f"{qn}: cron={expression!r} must have five fields (minute hour day-of-month month "
            "day-of-week), for example '30 2 * * *' for 02:30 UTC every day"
        )
    for part, (name, low, high) in zip(parts, FIELDS, strict=True):
        for item in part.split(","):
            found = _ITEM.match(item.lower())
            numbers = [int(n) for n in re.findall(r"[0-9]+", found.group(1))] if found else []
            if found is None or any(not low <= n <= high for n in numbers):
                raise DefinitionError(
                    f"{qn}: cron={expression!r}: the {name} field {part!r} is not valid "
                    f"(numbers {low}-{high}, '*', ranges a-b, lists a,b and steps */n)"
                )
