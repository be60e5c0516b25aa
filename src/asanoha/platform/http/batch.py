"""``POST /api/batch``: several writes in one transaction; the first failure undoes all.

A batch holds at most ``ASANOHA_MAX_BATCH_ITEMS`` items: one transaction runs them all, and
a long one can outlast the client's timeout and commit while the client counts it as
failed. A larger batch is refused (413 ``batch_too_large``) before any item runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pydantic
from fastapi import FastAPI
from pydantic import BaseModel, ConfigDict, Field, create_model
from starlette.requests import Request

from asanoha.platform.errors import PayloadTooLargeError, Reasons, ValidationError
from asanoha.platform.http.openapi import BEARER_SCHEME, SchemaCatalogue, json_body
from asanoha.platform.http.read_after import note_write
from asanoha.platform.http.routes import json_endpoint, replay_of, request_meta
from asanoha.platform.http.wire import ErrorEnvelope, SuccessEnvelope
from asanoha.platform.model import SessionUser
from asanoha.platform.service.idempotency import IDEMPOTENCY_HEADER
from asanoha.platform.service.validation import field_errors

if TYPE_CHECKING:
    from asanoha.platform.http.parts import HttpParts

BATCH_HANDLER = "batch"


class BatchItem(BaseModel):
    """One write of a batch."""

    model_config = ConfigDict(extra="forbid")
    qn: str = Field(description="qualified name of a write handler")
    payload: dict[str, Any] = Field(default_factory=dict)


class BatchRequest(BaseModel):
    """The writes of a batch, run in order in one transaction."""

    model_config = ConfigDict(extra="forbid")
    items: list[BatchItem] = Field(min_length=1)


def batch_request_model(max_items: int) -> type[BatchRequest]:
    """``BatchRequest`` with the item limit in force, so the OpenAPI document states it."""
    model: type[BatchRequest] = create_model(
        "BatchRequest",
        __base__=BatchRequest,
        __doc__=BatchRequest.__doc__,
        items=(list[BatchItem], Field(min_length=1, max_length=max_items)),
    )
    return model


def check_batch_size(body: Any, max_items: int) -> None:
    """``PayloadTooLargeError`` (``batch_too_large``) when ``body`` holds more than
    ``max_items`` items; counted before any item is validated."""
    items = body.get("items") if isinstance(body, dict) else None
    if isinstance(items, list) and len(items) > max_items:
        raise PayloadTooLargeError(Reasons.BATCH_TOO_LARGE, items=len(items), limit=max_items)


def parse_batch(body: Any, model: type[BatchRequest] = BatchRequest) -> BatchRequest:
    """The batch request, or ``ValidationError`` in the same shape as a handler's."""
    try:
        return model.model_validate(body)
    except pydantic.ValidationError as exc:
        raise ValidationError(handler=BATCH_HANDLER, fields=field_errors(exc)) from None


def add_batch_route(
    api: FastAPI, app: HttpParts, catalogue: SchemaCatalogue, model: type[BatchRequest]
) -> None:
    """Register ``POST /api/batch`` with the request ``model`` of ``batch_request_model``.
    The data is the list of the items' results."""
    service = app.service
    max_items = app.settings.max_batch_items

    def call(request: Request, user: SessionUser, body: Any) -> Any:
        check_batch_size(body, max_items)
        batch = parse_batch(body, model)
        items = [(item.qn, item.payload) for item in batch.items]
        results = service.dispatch_batch(
            items,
            user,
            meta=request_meta(request),
            idempotency_key=request.headers.get(IDEMPOTENCY_HEADER),
            replay=replay_of(request),
        )
        note_write(request, service)
        return results

    api.add_api_route(
        "/api/batch",
        json_endpoint(app, call),
        methods=["POST"],
        name=BATCH_HANDLER,
        operation_id=BATCH_HANDLER,
        summary="Run several writes in one transaction",
        description=(
            "Each item is a write handler call. The first failing item rolls back every item; "
            f"its error carries `details.index`. At most {max_items} items "
            "(`ASANOHA_MAX_BATCH_ITEMS`): a larger batch is refused with 413 "
            "`batch_too_large` before any item runs."
        ),
        tags=["batch"],
        response_model=None,
        openapi_extra={
            "requestBody": {"required": True, "content": json_body(catalogue.ref(model))},
            "responses": {
                "200": {
                    "description": "One result per item",
                    "content": json_body(catalogue.ref(SuccessEnvelope)),
                },
                "default": {
                    "description": "An error",
                    "content": json_body(catalogue.ref(ErrorEnvelope)),
                },
            },
            "security": [{BEARER_SCHEME: []}],
        },
    )
