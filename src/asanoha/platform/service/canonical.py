"""Canonical JSON: one spelling of a JSON value, and the digest of a validated payload.

Whatever compares two payloads by their bytes spells them here (sorted keys, no spaces,
UTF-8 kept): an approval's mac and its payload digest (``approvals``,
``call_description``), an idempotency key's stored payload (``idempotency``) and the digest
of an instruction write (``provenance``). Two spellings would make one payload two.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pydantic


def canonical_json(value: Any) -> str:
    """One spelling of a JSON value: sorted keys, no spaces, UTF-8 kept."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def payload_digest(model: pydantic.BaseModel) -> str:
    """SHA-256 of the canonical JSON of a validated payload (defaults included)."""
    return hashlib.sha256(canonical_json(model.model_dump(mode="json")).encode()).hexdigest()
