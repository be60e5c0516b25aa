"""Uploaded files: where their content is stored (``storage``: a folder or an S3-compatible
bucket) and the signed links that download it (``links``). The rows that describe them live
in ``store/files.py``; the rules of file fields in ``model/files.py`` and ``service/files.py``.
"""

from asanoha.platform.files.links import FileLinks
from asanoha.platform.files.storage import FileStorage, LocalStorage, storage_of

__all__ = ["FileLinks", "FileStorage", "LocalStorage", "storage_of"]
