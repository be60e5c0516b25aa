"""What Flower shows of a job's arguments: personal-data values replaced by a marker."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from asanoha.platform.model import JobDef, Registry

REDACTED = "[redacted]"


def personal_keys(registry: Registry, job: JobDef) -> frozenset[str]:
    """Payload keys of ``job`` that hold personal data.

    Known for a job triggered by a standard CRUD write: the payload is the validated payload
    of that write, so the entity's personal fields are the keys to hide.
    """
    if job.on is None:
        return frozenset()
    handler = registry.find_handler(job.on)
    if handler is None or handler.crud is None:
        return frozenset()
    entity_def = registry.find_entity(f"{handler.feature}:{handler.crud.entity}")
    return entity_def.entity.personal_fields if entity_def is not None else frozenset()


def redact(value: Any, keys: frozenset[str]) -> Any:
    """``value`` with the values under ``keys`` replaced, at any depth (update payloads nest
    their fields under ``changes``)."""
    if not keys:
        return value
    if isinstance(value, Mapping):
        return {k: REDACTED if k in keys else redact(v, keys) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact(item, keys) for item in value]
    return value


def task_reprs(
    payload: Mapping[str, Any], meta: Mapping[str, Any], keys: frozenset[str]
) -> dict[str, str]:
    """``argsrepr``/``kwargsrepr`` options for ``send_task``/``retry``."""
    return {"argsrepr": repr([redact(payload, keys)]), "kwargsrepr": repr({"meta": dict(meta)})}
