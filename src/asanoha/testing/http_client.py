"""``stack.http``: call handlers over HTTP as a given user and unpack the wire format."""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx2 as httpx  # the HTTP library of Starlette's TestClient
import pytest
from pydantic_core import to_jsonable_python
from starlette.exceptions import StarletteDeprecationWarning

from asanoha.platform.http import issue_token
from asanoha.platform.model import SessionUser
from asanoha.platform.settings import Settings
from asanoha.testing.users import TestUsers

with warnings.catch_warnings():
    # Starlette announces a future switch of its test client's HTTP library; the API stays.
    warnings.simplefilter("ignore", StarletteDeprecationWarning)
    from fastapi.testclient import TestClient

__all__ = ["HttpError", "StackHttp", "TestClient"]

BatchItems = Iterable[tuple[str, Any] | Mapping[str, Any]]


@dataclass(frozen=True)
class HttpError:
    """A failed call as the client saw it."""

    http_status: int
    code: str
    reason: str
    message: str
    user_message: str
    details: dict[str, Any]
    request_id: str | None
    body: dict[str, Any] = field(repr=False)

    @classmethod
    def from_response(cls, response: httpx.Response) -> HttpError:
        """Unpack ``{"isSuccess": false, "error": {...}}``."""
        body = response.json()
        error = body["error"]
        return cls(
            http_status=response.status_code,
            code=error["code"],
            reason=error["reason"],
            message=error["message"],
            user_message=error["userMessage"],
            details=error.get("details") or {},
            request_id=error.get("requestId"),
            body=body,
        )


def _json(value: Any) -> Any:
    # Payloads may hold UUIDs, datetimes, decimals or pydantic models.
    return to_jsonable_python(value)


class StackHttp:
    """HTTP helper of a stack, against its FastAPI application in-process."""

    def __init__(self, client: TestClient, settings: Settings) -> None:
        self.client = client
        self.settings = settings

    def headers_for(self, user: SessionUser, *, ttl: float | None = None) -> dict[str, str]:
        """``Authorization: Bearer <token>`` for ``user``; nothing for an anonymous caller."""
        if user.is_anonymous:
            return {}
        return {"Authorization": f"Bearer {issue_token(self.settings, user, ttl)}"}

    def post(
        self,
        path: str,
        payload: Any,
        user: SessionUser | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        """POST ``payload`` as JSON to ``path`` as ``user`` (default: ``TestUsers.admin``)."""
        all_headers = {**self.headers_for(user or TestUsers.admin), **(headers or {})}
        response: httpx.Response = self.client.post(path, json=_json(payload), headers=all_headers)
        return response

    def write(
        self,
        qn: str,
        payload: Any,
        user: SessionUser | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        """The raw response of ``POST /api/write/<qn>``."""
        return self.post(f"/api/write/{qn}", payload, user, headers)

    def query(
        self,
        qn: str,
        payload: Any,
        user: SessionUser | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        """The raw response of ``POST /api/query/<qn>``."""
        return self.post(f"/api/query/{qn}", payload, user, headers)

    def batch(
        self,
        items: BatchItems,
        user: SessionUser | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        """The raw response of ``POST /api/batch``; items are ``(qn, payload)`` or dicts."""
        body = [
            dict(item) if isinstance(item, Mapping) else {"qn": item[0], "payload": item[1]}
            for item in items
        ]
        return self.post("/api/batch", {"items": body}, user, headers)

    def write_ok(
        self,
        qn: str,
        payload: Any,
        user: SessionUser | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        """The ``data`` of a successful write; fails the test with the error body otherwise."""
        return _data(self.write(qn, payload, user, headers), qn)

    def write_err(
        self,
        qn: str,
        payload: Any,
        user: SessionUser | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> HttpError:
        """The error of a failing write; fails the test when the write succeeded."""
        return _error(self.write(qn, payload, user, headers), qn)

    def query_ok(
        self,
        qn: str,
        payload: Any = None,
        user: SessionUser | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        """The ``data`` of a successful query; fails the test otherwise."""
        return _data(self.query(qn, payload or {}, user, headers), qn)

    def query_err(
        self,
        qn: str,
        payload: Any = None,
        user: SessionUser | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> HttpError:
        """The error of a failing query; fails the test when the query succeeded."""
        return _error(self.query(qn, payload or {}, user, headers), qn)

    def batch_ok(
        self,
        items: BatchItems,
        user: SessionUser | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Sequence[Any]:
        """The results of a successful batch, one per item."""
        data: Sequence[Any] = _data(self.batch(items, user, headers), "batch")
        return data

    def batch_err(
        self,
        items: BatchItems,
        user: SessionUser | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> HttpError:
        """The error of a failing batch (``details.index`` names the failing item)."""
        return _error(self.batch(items, user, headers), "batch")


def _body(response: httpx.Response, what: str) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        pytest.fail(f"{what}: HTTP {response.status_code} without a JSON body: {response.text!r}")
    if not isinstance(body, dict) or "isSuccess" not in body:
        pytest.fail(f"{what}: HTTP {response.status_code}, not the wire format: {body!r}")
    return body


def _data(response: httpx.Response, what: str) -> Any:
    body = _body(response, what)
    if response.status_code != 200 or body["isSuccess"] is not True:
        pytest.fail(f"{what} failed with HTTP {response.status_code}: {body.get('error')!r}")
    return body["data"]


def _error(response: httpx.Response, what: str) -> HttpError:
    body = _body(response, what)
    if response.status_code < 400 or body["isSuccess"] is not False:
        pytest.fail(f"{what} succeeded (HTTP {response.status_code}) but should fail: {body!r}")
    return HttpError.from_response(response)
