"""How copies of one job run beside each other: ``Concurrency`` and the job's key.

A key is a list of payload field names or a function of the payload; without one the key is
the job itself. Keys are per tenant always: the stored key is a digest of (job, tenant,
key value), so it fits its column whatever the payload holds.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from asanoha.platform.errors import DefinitionError
from asanoha.platform.model.sync_callables import check_not_async

ConcurrencyMode = Literal["parallel", "skip", "replace", "sequential", "debounce"]
#: A key: payload field names, or a function of the payload.
KeySpec = Sequence[str] | Callable[[Mapping[str, Any]], Any] | None
MODES: tuple[ConcurrencyMode, ...] = ("parallel", "skip", "replace", "sequential", "debounce")


@dataclass(frozen=True)
class Concurrency:
    """A job's concurrency mode; build it with the class methods.

    - ``parallel()`` (the default): every copy runs as soon as a worker is free.
    - ``skip(key=...)``: while a row of the key is pending or running, an enqueue writes
      nothing and returns that row's id.
    - ``replace(key=...)``: an enqueue cancels the pending rows of the key and asks a
      running one to stop (``ctx.cancel_requested``), then enqueues the new one.
    - ``sequential(key=...)``: at most one attempt of the key runs at a time, across the
      fleet; the others wait in enqueue order, holding no worker.
    - ``debounce(seconds, key=...)``: enqueues within the window collapse into one row that
      runs once, ``seconds`` after the last enqueue, with the last payload.
    """

    mode: ConcurrencyMode = "parallel"
    key: KeySpec = None
    seconds: float | None = None

    @classmethod
    def parallel(cls) -> Concurrency:
        """Every copy runs as soon as a worker is free."""
        return cls("parallel")

    @classmethod
    def skip(cls, key: KeySpec = None) -> Concurrency:
        """An enqueue while a row of the key is pending or running returns that row."""
        return cls("skip", _key_spec(key, "skip"))

    @classmethod
    def replace(cls, key: KeySpec = None) -> Concurrency:
        """An enqueue cancels the key's pending rows (and asks a running one to stop)."""
        return cls("replace", _key_spec(key, "replace"))

    @classmethod
    def sequential(cls, key: KeySpec = None) -> Concurrency:
        """At most one attempt of the key runs at a time; the rest wait in enqueue order."""
        return cls("sequential", _key_spec(key, "sequential"))

    @classmethod
    def debounce(cls, seconds: float, key: KeySpec = None) -> Concurrency:
        """Enqueues within ``seconds`` of each other run once, after the last, with its
        payload."""
        if (
            isinstance(seconds, bool)
            or not isinstance(seconds, int | float)
            or not math.isfinite(seconds)
            or seconds <= 0
        ):
            raise DefinitionError(
                f"Concurrency.debounce(seconds) takes a window of seconds > 0, not {seconds!r}"
            )
        return cls("debounce", _key_spec(key, "debounce"), float(seconds))

    @property
    def keyed(self) -> bool:
        """Whether enqueues of this job look for rows of the same key."""
        return self.mode != "parallel"

    def field_names(self) -> tuple[str, ...]:
        """The payload fields the key reads (none for a function or no key)."""
        if self.key is None or callable(self.key):
            return ()
        return tuple(self.key)


def _key_spec(key: KeySpec, mode: str) -> KeySpec:
    if callable(key):
        check_not_async(
            key, f"Concurrency.{mode}(key=...)", "key function", "the key is read at the enqueue"
        )
    if key is None or callable(key):
        return key
    if isinstance(key, str | bytes):
        raise DefinitionError(
            f"Concurrency.{mode}(key={key!r}) takes a list of payload field names: "
            f"write key=[{key!r}]"
        )
    names = tuple(key)
    if not names or not all(isinstance(name, str) and name for name in names):
        raise DefinitionError(
            f"Concurrency.{mode}(key=...) takes payload field names (non-empty strings) "
            f"or a function of the payload, not {key!r}"
        )
    return names


def check_concurrency(
    concurrency: Concurrency | None,
    max_per_tenant: int | None,
    unique_for: float | None,
    *,
    qn: str,
    cron: str | None,
    schema_fields: Sequence[str] | None,
) -> Concurrency:
    """Fail at definition time on a concurrency setting of the job ``qn`` that cannot work;
    return the mode (``parallel`` when none is given)."""
    if concurrency is None:
        concurrency = Concurrency.parallel()
    if not isinstance(concurrency, Concurrency) or concurrency.mode not in MODES:
        raise DefinitionError(
            f"{qn}: concurrency= takes Concurrency.parallel(), .skip(...), .replace(...), "
            f".sequential(...) or .debounce(seconds, ...), not {concurrency!r}"
        )
    if max_per_tenant is not None and (
        isinstance(max_per_tenant, bool)
        or not isinstance(max_per_tenant, int)
        or max_per_tenant < 1
    ):
        raise DefinitionError(
            f"{qn}: max_per_tenant= is how many attempts may run at once per tenant, a whole "
            f"number >= 1, not {max_per_tenant!r}"
        )
    if unique_for is not None:
        if (
            isinstance(unique_for, bool)
            or not isinstance(unique_for, int | float)
            or not math.isfinite(unique_for)
            or unique_for <= 0
        ):
            raise DefinitionError(
                f"{qn}: unique_for= is a period in seconds > 0, not {unique_for!r}"
            )
        if cron is not None:
            raise DefinitionError(
                f"{qn}: unique_for= does not apply to a cron job (each tick runs once "
                "already); drop unique_for="
            )
        if concurrency.mode in ("skip", "replace", "debounce"):
            raise DefinitionError(
                f"{qn}: unique_for= and Concurrency.{concurrency.mode}(...) both decide what an "
                "enqueue of a busy key does; keep one"
            )
    if schema_fields is not None:
        missing = [name for name in concurrency.field_names() if name not in schema_fields]
        if missing:
            raise DefinitionError(
                f"{qn}: the concurrency key names {', '.join(missing)}, which the job's schema "
                f"lacks (it has {', '.join(schema_fields) or 'no fields'})"
            )
    return concurrency


def key_value(concurrency: Concurrency, payload: Mapping[str, Any]) -> Any:
    """The key's value for ``payload``: the named fields (a missing one counts as
    ``None``), the function's result, or ``None`` (the job itself)."""
    if concurrency.key is None:
        return None
    if callable(concurrency.key):
        return concurrency.key(payload)
    return [payload.get(name) for name in concurrency.key]


def stored_key(qn: str, tenant_id: str, value: Any) -> str:
    """The key a row stores: a digest of (job, tenant, key value), 64 hex characters."""
    text = json.dumps([qn, tenant_id, value], sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def tenant_slot_key(qn: str, tenant_id: str) -> str:
    """The key of ``max_per_tenant``: the job in one tenant."""
    return stored_key(qn, tenant_id, "max_per_tenant")
