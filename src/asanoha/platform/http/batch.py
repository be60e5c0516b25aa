"""``POST /api/batch``: several writes in one transaction; the first failure undoes all."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pydantic
from fastapi import FastAPI
from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request

from asanoha.platform.errors import ValidationError
from asanoha.platform.http.openapi import BEARER_SCHEME, SchemaCatalogue, json_body
from asanoha.platform.http.routes import json_endpoint, request_meta
from asanoha.platform.http.wire import ErrorEnvelope, SuccessEnvelope
from asanoha.platform.model import SessionUser
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


def parse_batch(body: Any) -> BatchRequest:
    """The batch request, or ``ValidationError`` in the same shape as a handler's."""
    try:
        return BatchRequest.model_validate(body)
    except pydantic.ValidationError as exc:
        raise ValidationError(handler=BATCH_HANDLER, fields=field_errors(exc)) from None


def add_batch_route(api: FastAPI, app: HttpParts, catalogue: SchemaCatalogue) -> None:
    """Register ``POST /api/batch``. The data is the list of the items' results."""
    service = app.service

    def call(request: Request, user: SessionUser, body: Any) -> Any:
        batch = parse_batch(body)
        items = [(item.qn, item.payload) for item in batch.items]
        return service.dispatch_batch(items, user, meta=request_meta(request))

    api.add_api_route(
        "/api/batch",
        json_endpoint(app, call),
        methods=["POST"],
        name=BATCH_HANDLER,
        operation_id=BATCH_HANDLER,
        summary="Run several writes in one transaction",
        description=(
            "Each item is a write handler call. The first failing item rolls back every item; "
            "its error carries `details.index`."
        ),
        tags=["batch"],
        response_model=None,
        openapi_extra={
            "requestBody": {"required": True, "content": json_body(catalogue.ref(BatchRequest))},
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
