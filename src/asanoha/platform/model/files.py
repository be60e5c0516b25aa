"""File and image fields: what their declarations may say, which content types they take,
and how an image is told by its leading bytes.

A file field holds the id of an uploaded file (``POST /api/files``); the event stores that
id and nothing else, so a rebuilt row holds the same id and reads the same file. The rules
here need no database: the write's check that the id names a live file of the tenant lives
in ``service/files.py``, beside the reference check.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from asanoha.platform.errors import DefinitionError
from asanoha.platform.model.fields import FILE_KINDS, Field

#: The image formats an ``image`` field takes, each told by its leading bytes.
IMAGE_TYPES: tuple[str, ...] = ("image/png", "image/jpeg", "image/gif", "image/webp")
#: A content type or a pattern of them: ``type/subtype``, ``type/*`` or ``*/*``.
_TYPE_PATTERN = re.compile(r"^(\*/\*|[a-z0-9][a-z0-9!#$&^_.+-]*/(\*|[a-z0-9][a-z0-9!#$&^_.+-]*))$")
#: How many leading bytes ``image_type_of`` reads.
SNIFFED_BYTES = 12


def check_file_options(where: str, declared: Field) -> None:
    """``DefinitionError`` starting with ``where`` (feature, entity, field) when the file
    options ``max_size=``/``types=`` do not fit ``declared``."""
    if declared.kind not in FILE_KINDS:
        if declared.max_size is not None or declared.types:
            raise DefinitionError(
                f"{where}: max_size= and types= apply to file and image fields only, "
                f"not to a {declared.kind} field"
            )
        return
    size = declared.max_size
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
        raise DefinitionError(f"{where}: max_size= takes a positive number of bytes, not {size!r}")
    for pattern in declared.types:
        if not isinstance(pattern, str) or not _TYPE_PATTERN.match(pattern):
            raise DefinitionError(
                f"{where}: types= holds {pattern!r}, which is no content type; write "
                "'application/pdf', 'image/*' or '*/*' (lower case)"
            )
    if declared.kind == "image":
        outside = [p for p in declared.types if not any(matches(p, t) for t in IMAGE_TYPES)]
        if outside:
            raise DefinitionError(
                f"{where}: an image field takes {', '.join(IMAGE_TYPES)}; types= names "
                f"{outside}, which matches none of them (use fields.file(types=...))"
            )


def matches(pattern: str, content_type: str) -> bool:
    """Whether ``content_type`` (``image/png``) is one ``pattern`` (``image/*``) names."""
    if pattern == "*/*":
        return True
    kind, _, sub = pattern.partition("/")
    found_kind, _, found_sub = content_type.partition("/")
    return kind == found_kind and sub in ("*", found_sub)


def accepts(declared: Field, content_type: str) -> bool:
    """Whether a file of ``content_type`` may be written to the file field ``declared``: an
    image field takes the four image formats (narrowed by ``types``), a file field what its
    ``types`` name (any type without them)."""
    if declared.kind == "image" and content_type not in IMAGE_TYPES:
        return False
    return not declared.types or any_matches(declared.types, content_type)


def any_matches(patterns: Iterable[str], content_type: str) -> bool:
    """Whether one of ``patterns`` names ``content_type``."""
    return any(matches(pattern, content_type) for pattern in patterns)


def image_type_of(head: bytes) -> str | None:
    """The image format whose signature ``head`` (the content's first bytes) starts with."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def input_schema(declared: Field) -> dict[str, Any]:
    """The JSON schema of a file field in a write's payload (OpenAPI, MCP tools): the id of
    an uploaded file, with the field's accepted types and size."""
    accepted = list(declared.types) or (list(IMAGE_TYPES) if declared.kind == "image" else [])
    rule: dict[str, Any] = {"types": accepted} if accepted else {}
    if declared.max_size is not None:
        rule["max_size"] = declared.max_size
    return {
        "type": "string",
        "format": "uuid",
        "description": "The id of an uploaded file (POST /api/files); read as "
        "{id, name, content_type, size, sha256, url}.",
        "x-asanoha-file": {"kind": declared.kind, **rule},
    }


#: The JSON schema of a stored file as the API answers it (upload, and file fields read).
FILE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "format": "uuid"},
        "name": {"type": "string"},
        "content_type": {"type": "string"},
        "size": {"type": "integer", "minimum": 0},
        "sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
        "url": {"type": "string", "description": "A short-lived signed download link"},
    },
    "required": ["id", "name", "content_type", "size", "sha256"],
}
