"""A file field on the feed, checked on the raw bytes: the file as the read API shows it
(``{id, name, content_type, size, sha256, url}`` with a signed link that downloads), only
for callers who may read the field, ``null`` once the file is deleted; live and when a
client catches up."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from pydantic import BaseModel
from sqlalchemy import event

from asanoha import Access, Agent, Entity, Feature, WriteContext, fields
from asanoha.platform.feed import FeedAccess, FeedReader
from asanoha.testing import Stack, TestUsers
from tests.integration.feed.conftest import Served, serve
from tests.integration.feed.sse_client import SseStream, open_stream

ADMIN, USER = TestUsers.admin, TestUsers.user
PDF = b"%PDF-1.7\n" + b"p" * 100
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + b"\x02" * 40
FILE_KEYS = {"id", "name", "content_type", "size", "sha256", "url"}

papers = Feature("papers")
papers.crud(
    "paper",
    Entity(
        table="feed_papers",
        fields={
            "title": fields.text(required=True, personal="self"),
            "attachment": fields.file(),
            "photo": fields.image(),
            "scan": fields.file(read=Access(roles=["Admin"])),
        },
    ),
    write=Access(roles=["Admin"]),
    read=Access(roles=["Admin", "User"]),
)


class RowId(BaseModel):
    id: uuid.UUID


@papers.write_handler("erase", access=Access(roles=["Admin"]), agent=Agent(risk="high"))
def erase(payload: RowId, ctx: WriteContext) -> Any:
    """Forget a paper (its own subject): its files are deleted."""
    return ctx.entity("paper").forget(payload.id)


CREATE, UPDATE = "papers:write:paper:create", "papers:write:paper:update"
TYPES = {"types": "papers:event:*"}


@pytest.fixture(params=["postgres", "sqlite"])
def stack(request: pytest.FixtureRequest, asanoha_stack: Callable[..., Any]) -> Stack:
    made: Stack = asanoha_stack(features=[papers], database=request.param)
    return made


@pytest.fixture
def served(stack: Stack) -> Iterator[Served]:
    yield from serve(stack)


def uploaded(stack: Stack, content: bytes, name: str, content_type: str) -> dict[str, Any]:
    response = stack.http.client.post(
        "/api/files",
        files={"file": (name, content, content_type)},
        headers=stack.http.headers_for(ADMIN),
    )
    assert response.status_code == 201, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


def values_of(stream: SseStream, index: int) -> dict[str, Any]:
    payload: dict[str, Any] = stream.events[index].json["payload"]
    values: dict[str, Any] = payload.get("data") or payload["changes"]
    return values


def assert_shown_with_a_link(
    stack: Stack, shown: Any, upload: dict[str, Any], content: bytes
) -> None:
    """``shown`` is the file as a read shows it, with a fresh link that downloads it."""
    assert set(shown) == FILE_KEYS
    assert {k: v for k, v in shown.items() if k != "url"} == upload
    assert shown["url"].startswith(f"/api/files/{upload['id']}/content?")
    expires = int(parse_qs(urlsplit(shown["url"]).query)["expires"][0])
    assert expires >= int(time.time())
    response = stack.http.client.get(shown["url"])
    assert (response.status_code, response.content) == (200, content)


def test_a_file_field_on_the_feed_is_the_file_with_a_link_for_those_who_may_read_it(
    stack: Stack, served: Served
) -> None:
    pdf = uploaded(stack, PDF, "report.pdf", "application/pdf")
    scan = uploaded(stack, PDF, "scan.pdf", "application/pdf")
    photo = uploaded(stack, PNG, "me.png", "image/png")
    with (
        open_stream(served.base_url, served.token(ADMIN), TYPES) as admin,
        open_stream(served.base_url, served.token(USER), TYPES) as user,
    ):
        for stream in (admin, user):
            stream.read_until(lambda s: b"retry:" in s.raw)
        row = stack.http.write_ok(
            CREATE, {"title": "Q3", "attachment": pdf["id"], "scan": scan["id"]}, ADMIN
        )
        change = {"id": str(row["id"]), "version": 1, "changes": {"photo": photo["id"]}}
        stack.http.write_ok(UPDATE, change, ADMIN)
        for stream in (admin, user):
            stream.read_until(lambda s: len(s.events) == 2)

    admin_bytes, user_bytes = bytes(admin.raw), bytes(user.raw)
    # The admin: every file field as the read API shows it, with a link.
    created = values_of(admin, 0)
    assert_shown_with_a_link(stack, created["attachment"], pdf, PDF)
    assert_shown_with_a_link(stack, created["scan"], scan, PDF)
    assert_shown_with_a_link(stack, values_of(admin, 1)["photo"], photo, PNG)
    # As it answers a detail, but for the link's signature and expiry.
    detail = stack.http.query_ok("papers:query:paper:detail", {"id": str(row["id"])}, ADMIN)
    assert {k: v for k, v in created["attachment"].items() if k != "url"} == {
        k: v for k, v in detail["attachment"].items() if k != "url"
    }
    # On the wire no file field is a bare id.
    for name, upload in (("attachment", pdf), ("scan", scan), ("photo", photo)):
        assert f'"{name}":"{upload["id"]}"'.encode() not in admin_bytes
    # The user: the fields it may read with a link; the scan (admins only) not at all, not
    # its id, its name, nor a link to it.
    assert_shown_with_a_link(stack, values_of(user, 0)["attachment"], pdf, PDF)
    assert_shown_with_a_link(stack, values_of(user, 1)["photo"], photo, PNG)
    assert "scan" not in values_of(user, 0)
    assert b'"scan"' not in user_bytes
    assert scan["id"].encode() not in user_bytes and b"scan.pdf" not in user_bytes


def test_a_client_catching_up_gets_links_minted_now_and_null_for_deleted_files(
    stack: Stack, served: Served
) -> None:
    kept = uploaded(stack, PDF, "kept.pdf", "application/pdf")
    gone = uploaded(stack, PDF + b"gone", "gone.pdf", "application/pdf")
    first = stack.http.write_ok(CREATE, {"title": "kept", "attachment": kept["id"]}, ADMIN)
    second = stack.http.write_ok(CREATE, {"title": "gone", "attachment": gone["id"]}, ADMIN)
    stack.http.write_ok("papers:write:erase", {"id": str(second["id"])}, ADMIN)
    with open_stream(served.base_url, served.token(ADMIN), {**TYPES, "after": 0}) as admin:
        admin.read_until(lambda s: len(s.events) == 3)
    by_stream = {m.json["streamId"]: m.json for m in admin.events if "data" in m.json["payload"]}
    assert_shown_with_a_link(
        stack, by_stream[str(first["id"])]["payload"]["data"]["attachment"], kept, PDF
    )
    # The forgotten row's file is deleted: null, as a read shows it, and nothing names it.
    assert by_stream[str(second["id"])]["payload"]["data"]["attachment"] is None
    assert b"gone.pdf" not in bytes(admin.raw)
    assert json.dumps(gone["sha256"]).encode() not in bytes(admin.raw)


def test_the_files_of_a_batch_are_looked_up_in_one_query(stack: Stack) -> None:
    for number in range(3):
        upload = uploaded(stack, PDF + bytes([number]), f"{number}.pdf", "application/pdf")
        stack.http.write_ok(CREATE, {"title": str(number), "attachment": upload["id"]}, ADMIN)
    service = stack.service
    access = FeedAccess(stack.registry, service.owner_rules, files=service.files)
    types = ["papers:event:paper.created"]
    reader = FeedReader(stack.db, stack.tables, access, service.personal, types)
    statements: list[str] = []

    def note(conn: Any, cursor: Any, statement: str, *rest: Any) -> None:
        statements.append(statement)

    event.listen(stack.db.engine, "before_cursor_execute", note)
    try:
        items = reader.read_range(ADMIN.tenant_id, 0, 2**62, types, 100)
    finally:
        event.remove(stack.db.engine, "before_cursor_execute", note)
    assert len(items) == 3
    assert all(item.files and item.files["attachment"] is not None for item in items)
    assert len([s for s in statements if "asanoha_files" in s]) == 1
