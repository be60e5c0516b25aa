"""The sealed form of one personal value: a text that names its tenant, subject, scope (entity
or event) and field, and holds the AES-256-GCM ciphertext of the value's JSON.

The header is the associated data, so a sealed value moved to another field, row or tenant
no longer opens.
"""

from __future__ import annotations

import binascii
import json
import os
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from asanoha.platform import base64url

PREFIX = "pii1."
NONCE_BYTES = 12
#: Built once: ``json.dumps`` with arguments builds an encoder on every call.
_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True)
class Sealed:
    """A parsed sealed value."""

    tenant_id: str
    subject: str
    scope: str
    field: str
    header: str
    blob: bytes

    @property
    def key_ref(self) -> tuple[str, str]:
        """The (tenant, subject) whose data key opens it."""
        return (self.tenant_id, self.subject)


def seal(cipher: AESGCM, tenant_id: str, subject: str, scope: str, field: str, value: Any) -> str:
    """``value`` (JSON) sealed under ``cipher`` (the subject's data key)."""
    header = base64url.encode(_COMPACT.encode([tenant_id, subject, scope, field]).encode())
    nonce = os.urandom(NONCE_BYTES)
    plain = _COMPACT.encode(value).encode()
    return f"{PREFIX}{header}.{base64url.encode(nonce + cipher.encrypt(nonce, plain, header.encode()))}"


def subject_start(tenant_id: str, subject: str) -> str:
    """The start that every value sealed for the subject has (whatever its scope and field).
    Values of another subject may share it: tell them apart with ``parse``."""
    named = _COMPACT.encode([tenant_id, subject]).encode()[:-1] + b","
    # Only whole 3-byte groups encode to characters that the bytes after them leave alone.
    whole = len(named) - len(named) % 3
    return f"{PREFIX}{base64url.encode(named[:whole])}"


def is_sealed(value: Any) -> bool:
    """Whether ``value`` looks like a sealed value."""
    return isinstance(value, str) and value.startswith(PREFIX)


def parse(value: str) -> Sealed | None:
    """The parts of a sealed value, or ``None`` when it is not one."""
    if not value.startswith(PREFIX):
        return None
    header, dot, body = value[len(PREFIX) :].partition(".")
    if not dot:
        return None
    try:
        parts = json.loads(base64url.decode(header))
        blob = base64url.decode(body)
    except (ValueError, binascii.Error):
        return None
    if not (isinstance(parts, list) and len(parts) == 4 and all(isinstance(p, str) for p in parts)):
        return None
    tenant_id, subject, scope, field = parts
    return Sealed(tenant_id, subject, scope, field, header, blob)


def open_sealed(cipher: AESGCM, sealed: Sealed) -> tuple[bool, Any]:
    """``(True, value)``, or ``(False, None)`` when it does not open under ``cipher``."""
    try:
        plain = cipher.decrypt(
            sealed.blob[:NONCE_BYTES], sealed.blob[NONCE_BYTES:], sealed.header.encode()
        )
    except (InvalidTag, ValueError):
        return False, None
    return True, json.loads(plain)
