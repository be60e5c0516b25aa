"""The console's form inputs, within the API's request limits: a posted body is read by the
API's ``read_body`` (``ASANOHA_MAX_BODY_BYTES``) and a JSON field is parsed by its
``parse_json`` (``ASANOHA_MAX_JSON_DEPTH``, numbers JSON can carry), so a form takes what
``/api/write`` takes and is refused with the same reasons."""

from __future__ import annotations

from typing import Any

from starlette.datastructures import FormData
from starlette.requests import Request

from asanoha.platform.http.limits import parse_json, read_body, replay_body
from asanoha.platform.settings import Settings


async def bounded(request: Request, settings: Settings) -> Request:
    """``request`` with its body read within ``max_body_bytes`` (``PayloadTooLargeError``
    past it); its ``form()`` parses that body, never a longer stream."""
    body = await read_body(request, settings.max_body_bytes)
    return Request(request.scope, replay_body(request, body))


def form_text(form: FormData, name: str) -> str:
    """The text of the field ``name`` (empty when absent or a file)."""
    value = form.get(name)
    return value if isinstance(value, str) else ""


def json_field(form: FormData, name: str, settings: Settings) -> Any:
    """The JSON value of the field ``name`` (empty: ``{}``); ``ValidationError`` with reason
    ``malformed_json`` or ``json_too_deep`` as the API answers a body."""
    return parse_json(form_text(form, name).encode(), settings.max_json_depth)
