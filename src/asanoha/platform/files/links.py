"""Signed download links of files: ``/api/files/<id>/content?expires=<unix time>&signature=
<HMAC-SHA256>``.

A link is minted where a row is read, for a caller who may read that file field of that row
(``service/files.py``), and checked by the download route without a bearer token (a browser
follows it as it is). The HMAC covers the tenant, the file id and the expiry, so a link
names one file of one tenant until it expires; the key is derived from the platform's token
secret for this purpose only.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
import uuid

from asanoha.platform.errors import AccessDeniedError, Reasons

CONTENT_PATH = "/api/files/{id}/content"


class FileLinks:
    """Mints and checks the signed download links of one application."""

    def __init__(self, secret: str | None, ttl_seconds: int) -> None:
        # Without a secret (the placeholder outside development) a key of this process:
        # its links hold only here.
        material = secret.encode() if secret is not None else secrets.token_bytes(32)
        self._key = hmac.new(material, b"asanoha file links v1", hashlib.sha256).digest()
        self.ttl_seconds = ttl_seconds

    def _signature(self, tenant_id: str, file_id: uuid.UUID, expires: int) -> str:
        message = f"{tenant_id}|{file_id}|{expires}".encode()
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()

    def url(self, tenant_id: str, file_id: uuid.UUID, *, now: float | None = None) -> str:
        """The link of ``file_id`` of ``tenant_id``, valid for ``ttl_seconds`` from ``now``."""
        expires = int(now if now is not None else time.time()) + self.ttl_seconds
        signature = self._signature(tenant_id, file_id, expires)
        path = CONTENT_PATH.format(id=file_id)
        return f"{path}?tenant={tenant_id}&expires={expires}&signature={signature}"

    def check(self, tenant_id: str, file_id: uuid.UUID, expires: int, signature: str) -> None:
        """Refuse (403 ``file_url_invalid``) a link that is expired or was not minted here."""
        expected = self._signature(tenant_id, file_id, expires)
        # Compared as bytes: a link's text may hold any character.
        given = signature.encode("utf-8", "replace")
        if not hmac.compare_digest(expected.encode(), given):
            raise AccessDeniedError(Reasons.FILE_URL_INVALID, id=str(file_id), problem="forged")
        if expires < time.time():
            raise AccessDeniedError(Reasons.FILE_URL_INVALID, id=str(file_id), problem="expired")
