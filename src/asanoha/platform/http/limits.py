"""Request limits: body size, JSON nesting depth, and JSON that does not parse."""

from __future__ import annotations

import json
import math
import re
from typing import Any

from starlette.requests import Request
from starlette.types import Message, Receive

from asanoha.platform.errors import PayloadTooLargeError, Reasons, ValidationError

# Strings are skipped before counting brackets: a "[" inside a string does not nest.
# Possessive quantifiers keep the scan linear on unterminated strings.
_JSON_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")


def exceeds_depth(text: str, max_depth: int) -> bool:
    """Whether the JSON ``text`` nests objects and arrays deeper than ``max_depth``.

    Checked on the text, before parsing, so a deeply nested body never reaches the
    recursive parser.
    """
    if text.count("[") + text.count("{") <= max_depth:
        return False
    depth = 0
    for match in _BRACKET.finditer(_JSON_STRING.sub("", text)):
        if match.group() in "[{":
            depth += 1
            if depth > max_depth:
                return True
        else:
            depth -= 1
    return False


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _finite_float(literal: str) -> float:
    # 1e400 parses as infinity, which no JSON answer can carry back.
    value = float(literal)
    if math.isinf(value):
        raise ValueError(f"the number {literal[:40]} is out of range")
    return value


def parse_json(raw: bytes, max_depth: int) -> Any:
    """The JSON value of a request body; an empty body is ``{}``.

    Raises ``ValidationError`` with reason ``malformed_json`` or ``json_too_deep``.
    """
    if not raw.strip():
        return {}
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValidationError(
            Reasons.MALFORMED_JSON, error=f"the body is not UTF-8: {exc}"
        ) from exc
    if exceeds_depth(text, max_depth):
        raise ValidationError(Reasons.JSON_TOO_DEEP, max_depth=max_depth)
    try:
        return json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
    except RecursionError as exc:
        raise ValidationError(Reasons.JSON_TOO_DEEP, max_depth=max_depth) from exc
    except ValueError as exc:
        raise ValidationError(Reasons.MALFORMED_JSON, error=str(exc)) from exc


async def read_body(request: Request, max_bytes: int) -> bytes:
    """The request body; ``PayloadTooLargeError`` as soon as it passes ``max_bytes``.

    A declared ``Content-Length`` above the limit is refused before anything is read; a
    chunked body is counted while it streams in.
    """
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise PayloadTooLargeError(limit=max_bytes)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise PayloadTooLargeError(limit=max_bytes)
        chunks.append(chunk)
    return b"".join(chunks)


def replay_body(request: Request, body: bytes) -> Receive:
    """A ``receive`` that hands on ``body`` (read already, within the limits) as the whole
    request body, then what the client sends next (its disconnect): for a reader that takes
    the body from ``receive`` itself, a form parser or an SDK."""
    replayed = False

    async def receive() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await request.receive()

    return receive


async def read_json_body(request: Request, *, max_bytes: int, max_depth: int) -> Any:
    """The parsed JSON body within the size and depth limits."""
    return parse_json(await read_body(request, max_bytes), max_depth)
