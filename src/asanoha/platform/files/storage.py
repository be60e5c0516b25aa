"""Where the content of uploaded files is kept: one small protocol, two implementations.

``LocalStorage`` keeps each file in a folder (the embedded default); ``S3Storage``
(``files/s3.py``) in a bucket of an S3-compatible store through boto3. They differ in
nothing else, so everything above them (uploads, downloads, forgetting) is written once.
Content is written once under a fresh key and never changed: a key names one content.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, Protocol

from asanoha.platform.settings import Settings

#: The size of the chunks a download streams.
CHUNK_BYTES = 64 * 1024
#: The folder of local storage when ``ASANOHA_FILE_DIR`` is unset.
DEFAULT_FILE_DIR = "asanoha-files"


class FileStorage(Protocol):
    """Puts, reads and deletes the content of files under keys (``<tenant>/<file id>``)."""

    #: What ``asanoha config`` and the logs call it (``local /srv/files``, ``s3 bucket/``).
    description: str

    def put(self, key: str, content: BinaryIO, *, size: int, content_type: str) -> None:
        """Store ``content`` (read from its start, ``size`` bytes) under ``key``."""
        ...

    def read(self, key: str) -> Iterator[bytes]:
        """The content under ``key``, in chunks; ``FileNotFoundError`` when there is none."""
        ...

    def delete(self, key: str) -> None:
        """Delete the content under ``key``; nothing happens when there is none."""
        ...


class LocalStorage:
    """Files in a folder: ``<folder>/<key>``. A file is written to a temporary name in its
    folder and renamed into place, so a reader never sees half a file."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder).resolve()
        self.description = f"local {self.folder}"

    def _path(self, key: str) -> Path:
        path = (self.folder / key).resolve()
        # Keys are made by the platform (tenant and uuid), never by a caller; this guards
        # the folder anyway.
        if not path.is_relative_to(self.folder):
            raise ValueError(f"file key {key!r} leaves the storage folder")
        return path

    def put(self, key: str, content: BinaryIO, *, size: int, content_type: str) -> None:
        """See ``FileStorage.put``."""
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        content.seek(0)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".upload-")
        try:
            with os.fdopen(handle, "wb") as target:
                shutil.copyfileobj(content, target, CHUNK_BYTES)
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise

    def read(self, key: str) -> Iterator[bytes]:
        """See ``FileStorage.read``."""
        source = self._path(key).open("rb")

        def chunks() -> Iterator[bytes]:
            with source:
                while chunk := source.read(CHUNK_BYTES):
                    yield chunk

        return chunks()

    def delete(self, key: str) -> None:
        """See ``FileStorage.delete``."""
        self._path(key).unlink(missing_ok=True)


def storage_of(settings: Settings) -> FileStorage:
    """The file storage ``settings`` name (``ASANOHA_FILE_STORAGE``)."""
    if settings.file_storage == "s3":
        # Imported only here: boto3 is the optional extra ``asanoha[s3]``.
        from asanoha.platform.files.s3 import S3Storage

        return S3Storage.from_settings(settings)
    return LocalStorage(settings.file_dir or DEFAULT_FILE_DIR)
