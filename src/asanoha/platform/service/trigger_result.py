"""The copy of a write handler's result stored on the job rows it triggers
(``ctx.trigger.result``).

The handler's result is not checked like a payload: the write must not fail, and above all
not after its commit, because the copy for its jobs cannot be stored. So the copy is made
storable before the job row is written, in the write's transaction:

- values JSON lacks become JSON (a ``Decimal``, a ``UUID``, a date as text, a set as a
  list, anything else as ``str(value)``); NaN and infinities become ``null``;
- text no JSON column holds (U+0000, an unpaired surrogate), in a value or a key, is
  written as a ``\\uXXXX`` escape, as errors are;
- a result that cannot be stored at all (over ``MAX_TRIGGER_RESULT_BYTES`` of JSON, a
  circular structure, bytes that are not UTF-8) is not stored: the job row records why, and
  a job that reads ``ctx.trigger.result`` fails with that reason, while jobs that do not read
  it run as usual.

Each change is logged as a warning naming the handler.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

import pydantic_core

from asanoha.platform.service.validation import UNSTORABLE_TEXT, printable

#: Bytes of JSON a stored trigger result may take: job rows are read on every claim.
MAX_TRIGGER_RESULT_BYTES = 1024 * 1024

log = logging.getLogger("asanoha.jobs")


@dataclass(frozen=True)
class StoredTriggerResult:
    """What the job rows store: the JSON value, or why there is none."""

    value: Any = None
    #: Why the result was not stored (a job reading it fails with this), else ``None``.
    refused: str | None = None


def storable_trigger_result(result: Any, handler_qn: str) -> StoredTriggerResult:
    """The copy of ``result`` the jobs triggered by ``handler_qn`` are given."""
    try:
        value = pydantic_core.to_jsonable_python(result, fallback=str, inf_nan_mode="null")
        escapes: list[str] = []
        value = _escaped(value, escapes)
        size = len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())
    except (ValueError, TypeError, UnicodeError, RecursionError) as exc:
        return _refused(handler_qn, f"it cannot be turned into JSON ({exc})")
    if escapes:
        log.warning(
            "%s: its result holds U+0000 or an unpaired surrogate (at %s); its jobs get it escaped",
            handler_qn,
            escapes[0] or "$",
        )
    if size > MAX_TRIGGER_RESULT_BYTES:
        return _refused(
            handler_qn,
            f"it takes {size:,} bytes of JSON, over the {MAX_TRIGGER_RESULT_BYTES:,} a job "
            "row keeps; return less (an id the job reads) from the handler",
        )
    return StoredTriggerResult(value)


def _refused(handler_qn: str, why: str) -> StoredTriggerResult:
    reason = f"the result of {handler_qn} was not stored for its jobs: {why}"
    log.warning("%s", reason)
    return StoredTriggerResult(None, reason)


def _escaped(value: Any, escapes: list[str], path: str = "") -> Any:
    """``value`` with unstorable text escaped; the paths changed are added to ``escapes``."""
    if isinstance(value, str):
        if UNSTORABLE_TEXT.search(value):
            escapes.append(path)
            return printable(value)
        return value
    if isinstance(value, dict):
        copy = {}
        for key, item in value.items():
            name = str(key)
            if UNSTORABLE_TEXT.search(name):
                escapes.append(f"{path}.{printable(name)}".lstrip("."))
                name = printable(name)
            copy[name] = _escaped(item, escapes, f"{path}.{name}".lstrip("."))
        return copy
    if isinstance(value, list):
        return [
            _escaped(item, escapes, f"{path}.{index}".lstrip("."))
            for index, item in enumerate(value)
        ]
    return value
