"""Master keys: the ``KeyWrapper`` that wraps data keys, and its local implementation.

``ASANOHA_MASTER_KEY`` holds one or more base64 keys of 32 bytes, comma-separated: the first
wraps new data keys, every one unwraps (so an old key stays until ``asanoha keys rotate`` has
re-wrapped everything under the new one). A cloud KMS is another ``KeyWrapper``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from typing import Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

KEY_BYTES = 32
NONCE_BYTES = 12


class MasterKeyError(ValueError):
    """A master key that cannot be used (bad base64, wrong length, unknown id)."""


class KeyWrapper(Protocol):
    """Wraps and unwraps data keys; ``context`` (tenant and subject) is bound to the wrap."""

    @property
    def current_key_id(self) -> str:
        """The id of the master key new wraps use."""

    def wrap(self, data_key: bytes, context: bytes) -> tuple[str, bytes]:
        """``(master key id, wrapped key)``."""

    def unwrap(self, key_id: str, wrapped: bytes, context: bytes) -> bytes:
        """The data key; ``MasterKeyError`` when no master key ``key_id`` is held."""


def key_id_of(master_key: bytes) -> str:
    """A master key's id: a digest that names it without disclosing it."""
    return hashlib.sha256(b"asanoha master key id\x00" + master_key).hexdigest()[:16]


def parse_master_keys(text: str) -> list[bytes]:
    """The keys of ``ASANOHA_MASTER_KEY`` (comma-separated base64, 32 bytes each)."""
    keys = []
    for position, part in enumerate(p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            key = base64.b64decode(part, validate=True)
        except (binascii.Error, ValueError):
            raise MasterKeyError(
                f"ASANOHA_MASTER_KEY: key {position + 1} is not base64; make one with "
                "`asanoha keys generate`"
            ) from None
        if len(key) != KEY_BYTES:
            raise MasterKeyError(
                f"ASANOHA_MASTER_KEY: key {position + 1} has {len(key)} bytes, not {KEY_BYTES}; "
                "make one with `asanoha keys generate`"
            )
        keys.append(key)
    if not keys:
        raise MasterKeyError("ASANOHA_MASTER_KEY holds no key")
    return keys


def generate_master_key() -> str:
    """A new master key, base64."""
    return base64.b64encode(os.urandom(KEY_BYTES)).decode()


class LocalKeyWrapper:
    """Wraps with AES-256-GCM under master keys held by the process."""

    def __init__(self, master_keys: list[bytes]) -> None:
        if not master_keys:
            raise MasterKeyError("a LocalKeyWrapper needs at least one master key")
        self._keys = {key_id_of(key): AESGCM(key) for key in master_keys}
        self._current = key_id_of(master_keys[0])

    @classmethod
    def from_text(cls, text: str) -> LocalKeyWrapper:
        """From the value of ``ASANOHA_MASTER_KEY``."""
        return cls(parse_master_keys(text))

    @property
    def current_key_id(self) -> str:
        return self._current

    def wrap(self, data_key: bytes, context: bytes) -> tuple[str, bytes]:
        nonce = os.urandom(NONCE_BYTES)
        return self._current, nonce + self._keys[self._current].encrypt(nonce, data_key, context)

    def unwrap(self, key_id: str, wrapped: bytes, context: bytes) -> bytes:
        cipher = self._keys.get(key_id)
        if cipher is None:
            raise MasterKeyError(
                f"no master key {key_id} in ASANOHA_MASTER_KEY: keep the old key listed after "
                "the new one until `asanoha keys rotate` has run"
            )
        try:
            return cipher.decrypt(wrapped[:NONCE_BYTES], wrapped[NONCE_BYTES:], context)
        except InvalidTag:
            raise MasterKeyError(f"data key of {context!r} does not unwrap") from None
