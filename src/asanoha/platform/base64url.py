"""URL-safe base64 without padding: sealed values, list cursors and approval tokens.

Through ``binascii`` directly: sealing a personal value encodes twice per value, on the write
path, and the ``base64`` module's wrappers cost more than the encoding itself.
"""

from __future__ import annotations

import binascii

_URLSAFE = bytes.maketrans(b"+/", b"-_")
_STANDARD = bytes.maketrans(b"-_", b"+/")


def encode(data: bytes) -> str:
    """``data`` as URL-safe base64, without ``=`` padding."""
    return binascii.b2a_base64(data, newline=False).translate(_URLSAFE).rstrip(b"=").decode()


def decode(text: str) -> bytes:
    """The bytes of ``encode``'s text. Raises ``ValueError`` (``binascii.Error`` or
    ``UnicodeEncodeError``) for text that is not base64."""
    raw = text.encode("ascii")
    return binascii.a2b_base64((raw + b"=" * (-len(raw) % 4)).translate(_STANDARD))
