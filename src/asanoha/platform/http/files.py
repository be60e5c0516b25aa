"""``POST /api/files`` (upload a file) and ``GET /api/files/{id}/content`` (download it
through a signed link).

An upload is a ``multipart/form-data`` body with one part named ``file``. The caller's
uploads are counted against ``ASANOHA_FILE_UPLOAD_RATE`` first (429 ``rate_limited``, before
the body is read). The body is counted while it streams in and refused with 413 ``file_too_large`` past
``ASANOHA_FILE_MAX_BYTES`` (plus the multipart framing); the part is spooled to a temporary
file (in memory up to 1 MiB), so no upload is held in memory whole. ``service/files.py``
checks its type, hashes and stores it, and the answer (201) is ``{id, name, content_type,
size, sha256}``: the id is what a write's file field takes.

A download needs no bearer token: the link a read minted for a caller who may read the field
(``url``) is the permission, until it expires.
"""

from __future__ import annotations

import io
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any, BinaryIO
from urllib.parse import quote

from fastapi import FastAPI
from starlette.concurrency import iterate_in_threadpool, run_in_threadpool
from starlette.datastructures import UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from asanoha.platform.errors import (
    AccessDeniedError,
    AsanohaError,
    PayloadTooLargeError,
    Reasons,
    ValidationError,
)
from asanoha.platform.files.links import CONTENT_PATH
from asanoha.platform.http.auth import authenticate_request
from asanoha.platform.http.openapi import BEARER_SCHEME, SchemaCatalogue, json_body
from asanoha.platform.http.routes import request_meta
from asanoha.platform.http.wire import (
    ErrorEnvelope,
    error_response,
    internal_error_response,
    success_response,
)
from asanoha.platform.model.files import FILE_SCHEMA

if TYPE_CHECKING:
    from asanoha.platform.http.parts import HttpParts

FILES_PATH = "/api/files"
#: Bytes a multipart body may hold beyond its file: boundaries, part headers, a name.
MULTIPART_FRAMING = 16 * 1024
#: The name of the part that carries the file.
FILE_PART = "file"


def add_file_routes(api: FastAPI, app: HttpParts, catalogue: SchemaCatalogue) -> None:
    """Register ``POST /api/files`` and ``GET /api/files/{id}/content``."""
    files = app.service.files
    settings = app.settings
    tokens = app.tokens
    limit = files.max_bytes

    async def upload(request: Request) -> Response:
        form = None
        try:
            user = await authenticate_request(tokens, request)
            # Counted before the body is read: a refused upload costs neither its transfer
            # nor its storage.
            admitted = await run_in_threadpool(files.admit_upload, user, request_meta(request))
            declared = request.headers.get("content-length")
            if (
                declared is not None
                and declared.isdigit()
                and int(declared) > limit + MULTIPART_FRAMING
            ):
                raise _too_large(limit)
            if not request.headers.get("content-type", "").startswith("multipart/form-data"):
                raise _no_file("send multipart/form-data with a part named 'file'")
            # A part without a filename is read as a field (in memory, as large as a file
            # may be): it is taken as the file's content all the same.
            parser = MultiPartParser(
                request.headers,
                _counted(request, limit),
                max_files=2,
                max_fields=2,
                max_part_size=limit + 1,
            )
            try:
                form = await parser.parse()
            except MultiPartException as exc:
                raise _no_file(f"the multipart body cannot be read: {exc.message}") from None
            others = sorted(name for name in form if name != FILE_PART)
            if others:
                raise _no_file(f"send one part named 'file' and no other (got {others})")
            part = form.get(FILE_PART)
            if isinstance(part, str):
                content: BinaryIO = io.BytesIO(part.encode())
                name, content_type = FILE_PART, None
            elif isinstance(part, UploadFile):
                content, name, content_type = (
                    part.file,
                    part.filename or FILE_PART,
                    part.content_type,
                )
            else:
                raise _no_file("send the file in a part named 'file'")
            result = await run_in_threadpool(
                lambda: files.upload(user, name, content_type, content, admitted=admitted)
            )
        except AsanohaError as error:
            return error_response(request, error)
        except Exception as exc:
            return internal_error_response(request, exc, development=settings.development)
        finally:
            if form is not None:
                await form.close()
        return success_response(result, status_code=201)

    async def download(request: Request) -> Response:
        try:
            file_id, tenant, expires, signature = _link_of(request)
            found, chunks = await run_in_threadpool(
                files.download, tenant, file_id, expires, signature
            )
        except AsanohaError as error:
            return error_response(request, error)
        except Exception as exc:
            return internal_error_response(request, exc, development=settings.development)
        headers = {
            "Content-Length": str(found.size),
            # Served from the API's origin: never rendered as a page of it.
            "Content-Disposition": _disposition(found.name),
            "X-Content-Type-Options": "nosniff",
            "Content-Security-Policy": "sandbox",
            "Cache-Control": "private, no-store",
            "ETag": f'"{found.sha256}"',
        }
        return StreamingResponse(
            _in_threadpool(chunks), media_type=found.content_type, headers=headers
        )

    errors = {
        "default": {"description": "An error", "content": json_body(catalogue.ref(ErrorEnvelope))}
    }
    api.add_api_route(
        FILES_PATH,
        upload,
        methods=["POST"],
        name="files-upload",
        operation_id="files-upload",
        summary="Upload a file: its id is what a file or image field takes",
        description=(
            f"A multipart/form-data body with one part named `{FILE_PART}`. Refused with 429 "
            "`rate_limited` past ASANOHA_FILE_UPLOAD_RATE uploads per user, with 413 "
            "`file_too_large` past ASANOHA_FILE_MAX_BYTES and 415 `file_type_not_allowed` for "
            "a type ASANOHA_FILE_TYPES does not take, or image bytes that are not the image "
            "type they claim."
        ),
        tags=["files"],
        response_model=None,
        openapi_extra={
            "security": [{BEARER_SCHEME: []}],
            "requestBody": {
                "required": True,
                "content": {
                    "multipart/form-data": {
                        "schema": {
                            "type": "object",
                            "properties": {FILE_PART: {"type": "string", "format": "binary"}},
                            "required": [FILE_PART],
                            "additionalProperties": False,
                        }
                    }
                },
            },
            "responses": {
                "201": {
                    "description": "The stored file",
                    "content": json_body(_success_of(FILE_SCHEMA)),
                },
                **errors,
            },
        },
    )
    api.add_api_route(
        CONTENT_PATH.replace("{id}", "{file_id}"),
        download,
        methods=["GET"],
        name="files-content",
        operation_id="files-content",
        summary="Download a file through the signed link a read answered (its url)",
        tags=["files"],
        response_model=None,
        openapi_extra={
            "security": [{}],
            "parameters": [
                _parameter("file_id", "path", {"type": "string", "format": "uuid"}),
                _parameter("tenant", "query", {"type": "string", "minLength": 1}),
                _parameter("expires", "query", {"type": "integer"}),
                _parameter("signature", "query", {"type": "string"}),
            ],
            "responses": {
                "200": {
                    "description": "The file's content, as its content type",
                    "content": {"*/*": {"schema": {"type": "string", "format": "binary"}}},
                },
                **errors,
            },
        },
    )


def _parameter(name: str, where: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "in": where, "required": True, "schema": schema}


def _success_of(data: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"isSuccess": {"type": "boolean", "enum": [True]}, "data": data},
        "required": ["isSuccess", "data"],
    }


def _link_of(request: Request) -> tuple[uuid.UUID, str, int, str]:
    """The file id, tenant, expiry and signature of a download link; a link that does not
    parse was not minted here (403 ``file_url_invalid``)."""
    raw = request.path_params.get("file_id", "")
    query = request.query_params
    try:
        file_id = uuid.UUID(str(raw))
        expires = int(query["expires"])
        return file_id, query["tenant"], expires, query["signature"]
    except (KeyError, ValueError):
        raise AccessDeniedError(
            Reasons.FILE_URL_INVALID, id=str(raw), problem="malformed"
        ) from None


async def _counted(request: Request, limit: int) -> AsyncGenerator[bytes, None]:
    """The request body as it streams in, refused (413) once it passes what an upload of
    ``limit`` bytes can take with its multipart framing."""
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit + MULTIPART_FRAMING:
            raise _too_large(limit)
        yield chunk


async def _in_threadpool(chunks: Iterator[bytes]) -> AsyncIterator[bytes]:
    # A storage read blocks (a file, an HTTP response of S3): off the event loop.
    async for chunk in iterate_in_threadpool(chunks):
        yield chunk


def _disposition(name: str) -> str:
    """An attachment named ``name``: plain ASCII for old clients, UTF-8 (RFC 6266) for the
    others."""
    plain = "".join(c if c.isascii() and c.isprintable() and c not in '"\\' else "_" for c in name)
    return f"attachment; filename=\"{plain}\"; filename*=UTF-8''{quote(name)}"


def _too_large(limit: int) -> PayloadTooLargeError:
    return PayloadTooLargeError(Reasons.FILE_TOO_LARGE, limit=limit, where="POST /api/files")


def _no_file(message: str) -> ValidationError:
    return ValidationError(
        handler=FILES_PATH, fields=[{"path": FILE_PART, "type": "missing", "message": message}]
    )
