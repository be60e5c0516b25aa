"""File and image fields: uploads through ``POST /api/files`` (size and type limits, hashed),
file ids written through the write pipeline (checked in the write's transaction), reads that
answer the file with a signed download link, forgetting a subject deletes its files, and a
rebuild reproduces the file fields; on Postgres and SQLite."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import io
import json
import re
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from pydantic import BaseModel
from sqlalchemy import func, select, update

from asanoha import (
    Access,
    Agent,
    App,
    Entity,
    Feature,
    SessionUser,
    Settings,
    UnprocessableError,
    WriteContext,
    fields,
)
from asanoha.handlers import personal_data
from asanoha.platform.errors import DefinitionError, RateLimitError
from asanoha.platform.model import Registry
from asanoha.platform.model.agent_tools import input_schema
from asanoha.platform.store import rebuild_projection
from asanoha.testing import TestUsers

ADMIN, USER, OTHER = TestUsers.admin, TestUsers.user, TestUsers.other_tenant
OFFICER = TestUsers.system_admin
PDF = b"%PDF-1.7\n" + b"x" * 200
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + b"\x01" * 40

document = Entity(
    table="files_documents",
    fields={
        "title": fields.text(required=True, personal="self"),
        "attachment": fields.file(types=["application/pdf", "text/*"], max_size=300),
        "photo": fields.image(),
        "scan": fields.file(read=Access(roles=["Admin"])),
    },
)
archive = Feature("archive")
archive.crud(
    "document",
    document,
    write=Access(roles=["Admin"]),
    read=Access(roles=["Admin", "User"]),
    descriptions={"create": "Create a document with its files."},
)
# A claim is about the person it names (its note is that person's data): so are its files.
archive.crud(
    "person",
    Entity(table="files_people", fields={"name": fields.text(personal="self")}),
    write=Access(roles=["Admin"]),
    read=Access(roles=["Admin"]),
)
archive.crud(
    "claim",
    Entity(
        table="files_claims",
        fields={
            "person": fields.reference("person", required=True),
            "note": fields.text(personal={"of": "person"}),
            "evidence": fields.file(),
        },
    ),
    write=Access(roles=["Admin"]),
    read=Access(roles=["Admin"]),
)


class Erase(BaseModel):
    id: str


@archive.write_handler("erase", access=Access(roles=["Admin"]), agent=Agent(risk="high"))
def erase(payload: Erase, ctx: WriteContext) -> Any:
    """Forget a document through the executor (its own subject)."""
    return ctx.entity("document").forget(payload.id)


class Echo(BaseModel):
    value: dict[str, Any]


@archive.write_handler("echo", access=Access(roles=["Admin"]), agent=Agent(risk="low"))
def echo(payload: Echo, ctx: WriteContext) -> Any:
    """Answer the payload's value as it is."""
    return payload.value


class File(BaseModel):
    attachment: str
    key: str


@archive.write_handler("file", access=Access(roles=["Admin"]), agent=Agent(risk="low"))
def file_once(payload: File, ctx: WriteContext) -> Any:
    """Create a document under a key of the handler's own (a retried job's shape)."""
    values = {"title": "filed", "attachment": payload.attachment}
    return ctx.write(CREATE, values, idempotency_key=payload.key)


CREATE, UPDATE = "archive:write:document:create", "archive:write:document:update"
ECHO, FILE = "archive:write:echo", "archive:write:file"
DETAIL, LIST = "archive:query:document:detail", "archive:query:document:list"


@pytest.fixture(params=["postgres", "sqlite"])
def stack(request: pytest.FixtureRequest, asanoha_stack: Callable[..., Any]) -> Any:
    return asanoha_stack(
        features=[archive, personal_data.feature],
        database=request.param,
        settings={"file_max_bytes": 1000, "file_types": "application/pdf,image/*,text/*"},
    )


def upload(stack: Any, content: bytes, name: str, content_type: str, user: Any = ADMIN) -> Any:
    """The raw response of ``POST /api/files``."""
    return stack.http.client.post(
        "/api/files",
        files={"file": (name, content, content_type)},
        headers=stack.http.headers_for(user),
    )


def uploaded(stack: Any, content: bytes, name: str, content_type: str, user: Any = ADMIN) -> Any:
    response = upload(stack, content, name, content_type, user)
    assert response.status_code == 201, response.text
    return response.json()["data"]


def file_rows(stack: Any) -> list[Any]:
    files = stack.tables.files
    with stack.db.connect() as conn:
        return list(conn.execute(select(files).order_by(files.c.created_at)))


def stored_paths(stack: Any) -> list[Path]:
    folder = Path(stack.app.settings.file_dir)
    return sorted(p for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


def fetch(stack: Any, url: str) -> Any:
    return stack.http.client.get(url)


def test_an_upload_is_hashed_stored_and_read_back_through_a_signed_link(stack: Any) -> None:
    pdf = uploaded(stack, PDF, "../report.pdf", "application/pdf")
    assert pdf["name"] == "report.pdf"
    assert (pdf["content_type"], pdf["size"]) == ("application/pdf", len(PDF))
    assert pdf["sha256"] == hashlib.sha256(PDF).hexdigest()
    photo = uploaded(stack, PNG, "me.png", "image/png")

    row = stack.http.write_ok(
        CREATE, {"title": "Q3", "attachment": pdf["id"], "photo": photo["id"]}, ADMIN
    )
    # The answer, a detail and a list show the file with a link, not the bare id.
    detail = stack.http.query_ok(DETAIL, {"id": str(row["id"])}, ADMIN)
    listed = stack.http.query_ok(LIST, {}, ADMIN)["rows"][0]
    for shown in (row, detail, listed):
        assert {k: v for k, v in shown["attachment"].items() if k != "url"} == pdf
        assert shown["photo"]["content_type"] == "image/png"
    response = fetch(stack, detail["attachment"]["url"])
    assert response.status_code == 200
    assert response.content == PDF
    assert response.headers["content-type"] == "application/pdf"
    assert response.headers["content-disposition"] == (
        "attachment; filename=\"report.pdf\"; filename*=UTF-8''report.pdf"
    )
    assert response.headers["x-content-type-options"] == "nosniff"
    assert fetch(stack, detail["photo"]["url"]).content == PNG

    # The file rows record which row holds each file; the event holds the id alone.
    held = {r.field: (r.entity, r.row_id) for r in file_rows(stack)}
    assert held == {
        "attachment": ("archive:document", str(row["id"])),
        "photo": ("archive:document", str(row["id"])),
    }
    events = stack.tables.events
    with stack.db.connect() as conn:
        payload = conn.execute(
            select(events.c.payload).where(events.c.type == "archive:event:document.created")
        ).scalar_one()
    assert payload["data"]["attachment"] == pdf["id"]


def test_a_field_the_caller_may_not_read_gets_no_link(stack: Any) -> None:
    scan = uploaded(stack, PDF, "scan.pdf", "application/pdf")
    row = stack.http.write_ok(CREATE, {"title": "t", "scan": scan["id"]}, ADMIN)
    assert "url" in stack.http.query_ok(DETAIL, {"id": str(row["id"])}, ADMIN)["scan"]
    for shown in (
        stack.http.query_ok(DETAIL, {"id": str(row["id"])}, USER),
        stack.http.query_ok(LIST, {}, USER)["rows"][0],
    ):
        assert "scan" not in shown


def test_a_signed_link_that_is_expired_forged_or_for_another_tenant_is_refused(stack: Any) -> None:
    pdf = uploaded(stack, PDF, "a.pdf", "application/pdf")
    row = stack.http.write_ok(CREATE, {"title": "t", "attachment": pdf["id"]}, ADMIN)
    url = stack.http.query_ok(DETAIL, {"id": str(row["id"])}, ADMIN)["attachment"]["url"]
    parts = urlsplit(url)
    query = {k: v[0] for k, v in parse_qs(parts.query).items()}
    links = stack.service.files.links
    expired = links.url(query["tenant"], uuid.UUID(pdf["id"]), now=0)
    cases = {
        "expired": expired,
        "forged": url.replace(query["signature"], "0" * 64),
        "forged ": url.replace(f"tenant={query['tenant']}", f"tenant={OTHER.tenant_id}"),
        "malformed": parts.path,
    }
    for problem, bad in cases.items():
        response = fetch(stack, bad)
        error = response.json()["error"]
        assert response.status_code == 403, bad
        assert (error["code"], error["reason"]) == ("access_denied", "file_url_invalid")
        assert error["details"]["problem"] == problem.strip()
    assert fetch(stack, url).status_code == 200


def test_writes_naming_a_file_the_field_does_not_take_are_refused(stack: Any) -> None:
    pdf = uploaded(stack, PDF, "a.pdf", "application/pdf")
    big = uploaded(stack, PDF + b"y" * 200, "big.pdf", "application/pdf")
    photo = uploaded(stack, PNG, "p.png", "image/png")
    theirs = uploaded(stack, PDF, "theirs.pdf", "application/pdf", OTHER)
    held = stack.http.write_ok(CREATE, {"title": "first", "attachment": pdf["id"]}, ADMIN)
    cases = [
        ("attachment", str(uuid.uuid4()), "file_not_found"),
        ("attachment", theirs["id"], "file_not_found"),
        ("attachment", photo["id"], "file_type_not_allowed"),
        ("photo", big["id"], "file_type_not_allowed"),
        ("attachment", big["id"], "file_too_large"),
        ("attachment", pdf["id"], "file_in_use"),
    ]
    for field, file_id, reason in cases:
        with stack.nothing_written():
            error = stack.http.write_err(CREATE, {"title": "t", field: file_id}, ADMIN)
        assert (error.http_status, error.code, error.reason) == (422, "unprocessable", reason)
        assert (error.details["entity"], error.details["field"]) == ("archive:document", field)
        assert error.details["id"] == file_id
    # An update is held to the same rules; the row and its file stay as they were.
    change = {"id": str(held["id"]), "version": 1, "changes": {"attachment": photo["id"]}}
    with stack.nothing_written():
        error = stack.http.write_err(UPDATE, change, ADMIN)
    assert (error.http_status, error.reason) == (422, "file_type_not_allowed")
    assert stack.http.query_ok(LIST, {}, ADMIN)["rows"][0]["attachment"]["id"] == pdf["id"]
    # The same file may be written to its own row again.
    same = {"id": str(held["id"]), "version": 1, "changes": {"attachment": pdf["id"]}}
    assert stack.http.write_ok(UPDATE, same, ADMIN)["version"] == 2


def test_uploads_outside_the_limits_are_refused_and_nothing_is_stored(stack: Any) -> None:
    cases = [
        (b"z" * 1001, "big.pdf", "application/pdf", 413, "payload_too_large", "file_too_large"),
        (b"MZ\x90", "tool.exe", "application/x-msdownload", 415, "unsupported_media_type",
         "file_type_not_allowed"),
        (b"GIF89a" + PDF, "fake.png", "image/png", 415, "unsupported_media_type",
         "file_type_not_allowed"),
    ]  # fmt: skip
    for content, name, content_type, status, code, reason in cases:
        before = len(file_rows(stack))
        response = upload(stack, content, name, content_type)
        error = response.json()["error"]
        assert response.status_code == status, response.text
        assert (error["code"], error["reason"]) == (code, reason)
        assert len(file_rows(stack)) == before
        assert stored_paths(stack) == []
    # Sent in chunks without a length, the body is counted while it streams in.
    boundary = "asanoha-boundary"
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.pdf"\r\n'
        "Content-Type: application/pdf\r\n\r\n"
    ).encode()

    def chunks() -> Iterator[bytes]:
        yield head
        for _ in range(40):
            yield b"z" * 1000
        yield f"\r\n--{boundary}--\r\n".encode()

    streamed = stack.http.client.post(
        "/api/files",
        content=chunks(),
        headers={
            **stack.http.headers_for(ADMIN),
            "content-type": f"multipart/form-data; boundary={boundary}",
        },
    )
    assert "content-length" not in streamed.request.headers
    assert (streamed.status_code, streamed.json()["error"]["reason"]) == (413, "file_too_large")
    missing = stack.http.client.post(
        "/api/files", data={"other": "x"}, headers=stack.http.headers_for(ADMIN)
    )
    assert missing.status_code == 400
    assert missing.json()["error"]["details"]["fields"][0]["path"] == "file"
    anonymous = stack.http.client.post("/api/files", files={"file": ("a.pdf", PDF)})
    assert anonymous.status_code == 401
    assert file_rows(stack) == [] and stored_paths(stack) == []
    # A type the settings take is stored, typed from its name when the part says nothing.
    text = uploaded(stack, b"hello", "notes.txt", "")
    assert text["content_type"] == "text/plain"


@pytest.mark.parametrize("database", ["postgres", "sqlite"])
def test_uploads_past_the_rate_are_refused_before_anything_is_stored(
    asanoha_stack: Any, database: str
) -> None:
    stack = asanoha_stack(
        features=[archive, personal_data.feature],
        database=database,
        settings={"file_types": "application/pdf,image/*,text/*", "file_upload_rate": "2/minute"},
    )
    for number in range(2):
        uploaded(stack, PDF, f"{number}.pdf", "application/pdf")
    rows, paths = file_rows(stack), stored_paths(stack)
    assert len(rows) == len(paths) == 2
    with stack.nothing_written():
        response = upload(stack, PDF, "third.pdf", "application/pdf")
    error = response.json()["error"]
    assert response.status_code == 429, response.text
    assert (error["code"], error["reason"]) == ("rate_limited", "rate_limited")
    assert error["details"]["handler"] == "POST /api/files"
    assert (error["details"]["limit"], error["details"]["per"]) == (2, "user")
    assert int(response.headers["Retry-After"]) >= 1
    assert response.headers["RateLimit-Limit"] == "2"
    # Refused before the body was read: no row, no content, not even a temporary file.
    assert file_rows(stack) == rows
    assert stored_paths(stack) == paths
    folder = Path(stack.app.settings.file_dir)
    assert sorted(p for p in folder.rglob("*") if p.name.startswith(".upload-")) == []
    # The Python API counts in the same window of the same user.
    with stack.nothing_written(), pytest.raises(RateLimitError) as refused:
        stack.service.files.upload(ADMIN, "py.pdf", "application/pdf", io.BytesIO(PDF))
    assert refused.value.details["handler"] == "POST /api/files"
    assert file_rows(stack) == rows and stored_paths(stack) == paths
    # Each user has a window of its own.
    uploaded(stack, PDF, "theirs.pdf", "application/pdf", USER)
    assert len(file_rows(stack)) == 3


def test_uploads_count_under_the_default_rate_when_they_have_none_of_their_own(
    asanoha_stack: Any,
) -> None:
    stack = asanoha_stack(
        features=[archive, personal_data.feature],
        database="sqlite",
        settings={"rate_limit_default": "1/minute"},
    )
    uploaded(stack, PDF, "a.pdf", "application/pdf")
    with stack.nothing_written():
        response = upload(stack, PDF, "b.pdf", "application/pdf")
    assert (response.status_code, response.json()["error"]["reason"]) == (429, "rate_limited")
    assert len(file_rows(stack)) == len(stored_paths(stack)) == 1
    # As for handlers, the default leaves out the tenant's system user (a job's uploads).
    system = SessionUser.system(ADMIN.tenant_id)
    for name in ("c.pdf", "d.pdf"):
        stack.service.files.upload(system, name, "application/pdf", io.BytesIO(PDF))
    assert len(file_rows(stack)) == 3


def test_an_upload_rate_that_is_no_rate_or_has_no_redis_names_the_setting() -> None:
    with pytest.raises(DefinitionError, match="ASANOHA_FILE_UPLOAD_RATE='often'"):
        App([archive], Settings(file_upload_rate="often", rate_limit_url="redis://127.0.0.1:1/0"))
    with pytest.raises(DefinitionError, match=r"ASANOHA_FILE_UPLOAD_RATE.*ASANOHA_RATE_LIMIT_URL"):
        App([archive], Settings(file_upload_rate="5/minute", broker_url="memory://"))


def expiry_of(url: str) -> int:
    return int(parse_qs(urlsplit(url).query)["expires"][0])


def expire_kept_links(stack: Any) -> dict[str, str]:
    """Rewrite the links in every kept outcome as minted an hour before their time-to-live
    (expired, as the links of a repeat sent later are); the expired link of each file id."""
    table, links = stack.tables.idempotency, stack.service.files.links
    expired: dict[str, str] = {}
    with stack.db.begin() as conn:
        for row in conn.execute(select(table)).mappings().all():
            text = json.dumps(row["body"])
            for url in set(re.findall(r"/api/files/[^\"]+", text)):
                file_id = urlsplit(url).path.split("/")[3]
                tenant = parse_qs(urlsplit(url).query)["tenant"][0]
                old = links.url(tenant, uuid.UUID(file_id), now=time.time() - 3600)
                expired[file_id] = old
                text = text.replace(url, old)
            keys = [table.c[name] == row[name] for name in ("tenant_id", "principal", "key")]
            conn.execute(update(table).where(*keys).values(body=json.loads(text)))
    return expired


def assert_fresh_links(stack: Any, shown: dict[str, Any], expired: dict[str, str]) -> None:
    """Each file of ``shown`` carries a link minted now that downloads, not its expired one."""
    for name, content in (("attachment", PDF), ("photo", PNG), ("scan", PDF)):
        url = shown[name]["url"]
        assert url != expired[shown[name]["id"]]
        assert expiry_of(url) >= int(time.time()) + stack.app.settings.file_url_ttl - 60
        response = fetch(stack, url)
        assert (response.status_code, response.content) == (200, content)
        assert fetch(stack, expired[shown[name]["id"]]).status_code == 403


def files_of_a_document(stack: Any, tag: str) -> dict[str, Any]:
    return {
        "title": tag,
        "attachment": uploaded(stack, PDF, f"{tag}.pdf", "application/pdf")["id"],
        "photo": uploaded(stack, PNG, f"{tag}.png", "image/png")["id"],
        "scan": uploaded(stack, PDF, f"{tag}-scan.pdf", "application/pdf")["id"],
    }


def test_a_repeated_keyed_write_answers_links_minted_for_the_repeat(stack: Any) -> None:
    payload = files_of_a_document(stack, "http")
    headers = {"Idempotency-Key": "doc-1"}
    first = stack.http.write(CREATE, payload, ADMIN, headers)
    assert first.status_code == 200, first.text
    expired = expire_kept_links(stack)
    assert set(expired) == {payload["attachment"], payload["photo"], payload["scan"]}
    with stack.nothing_written():
        again = stack.http.write(CREATE, payload, ADMIN, headers)
    assert again.headers["Idempotent-Replayed"] == "true"
    shown = again.json()["data"]
    assert shown["id"] == first.json()["data"]["id"]
    assert_fresh_links(stack, shown, expired)
    # Everything but the links is the first answer.
    assert {k: v for k, v in shown["attachment"].items() if k != "url"} == {
        k: v for k, v in first.json()["data"]["attachment"].items() if k != "url"
    }

    # Through the Python API, and in a keyed batch, the same.
    payload = files_of_a_document(stack, "python")
    first = stack.service.dispatch_write(CREATE, payload, ADMIN, idempotency_key="doc-2")
    batch = [(CREATE, files_of_a_document(stack, "batch"))]
    stack.http.batch_ok(batch, ADMIN, headers={"Idempotency-Key": "batch-1"})
    expired = expire_kept_links(stack)
    with stack.nothing_written():
        again = stack.service.dispatch_write(CREATE, payload, ADMIN, idempotency_key="doc-2")
        replayed = stack.http.batch_ok(batch, ADMIN, headers={"Idempotency-Key": "batch-1"})
    assert again["id"] == str(first["id"])
    assert_fresh_links(stack, again, expired)
    assert_fresh_links(stack, replayed[0], expired)


def test_a_repeated_keyed_tool_call_answers_links_minted_for_the_repeat(stack: Any) -> None:
    import anyio

    from asanoha.agents import IDEMPOTENCY_META_KEY
    from asanoha.testing.serving import serve_in_thread
    from tests.integration.agents.scenario import data_of
    from tests.integration.agents.test_mcp_http import mcp_session

    payload = files_of_a_document(stack, "mcp")
    meta = {IDEMPOTENCY_META_KEY: "tool-1"}

    async def call(base_url: str) -> Any:
        async with mcp_session(f"{base_url}/mcp", stack, ADMIN) as session:
            return await session.call_tool(CREATE, payload, meta=meta)

    with serve_in_thread(stack.app.build_http()) as base_url:
        first = anyio.run(call, base_url)
        expired = expire_kept_links(stack)
        with stack.nothing_written():
            again = anyio.run(call, base_url)
    assert again.meta is not None and again.meta["asanoha.dev/idempotentReplayed"] is True
    assert data_of(again)["id"] == data_of(first)["id"]
    assert_fresh_links(stack, data_of(again), expired)


def test_a_nested_keyed_write_repeated_answers_links_minted_for_the_repeat(stack: Any) -> None:
    pdf = uploaded(stack, PDF, "nested.pdf", "application/pdf")
    payload = {"attachment": pdf["id"], "key": "nested-1"}
    first = stack.http.write_ok(FILE, payload, ADMIN)
    expired = expire_kept_links(stack)
    assert set(expired) == {pdf["id"]}
    # The outer write is not keyed: it runs again, and its ctx.write answers the kept outcome.
    again = stack.http.write_ok(FILE, payload, ADMIN)
    assert again["id"] == first["id"]
    url = again["attachment"]["url"]
    assert url != expired[pdf["id"]]
    assert expiry_of(url) >= int(time.time())
    assert fetch(stack, url).content == PDF
    # Inside a keyed outer write, the files of a nested write (run, or answered from its
    # kept outcome) are the outer's to relink too.
    other = uploaded(stack, PDF + b"other", "other.pdf", "application/pdf")
    fresh = {"attachment": other["id"], "key": "nested-2"}
    for key, sent, content in (("outer-1", fresh, PDF + b"other"), ("outer-2", payload, PDF)):
        stack.service.dispatch_write(FILE, sent, ADMIN, idempotency_key=key)
        expired = expire_kept_links(stack)
        outer = stack.service.dispatch_write(FILE, sent, ADMIN, idempotency_key=key)
        assert outer["attachment"]["url"] != expired[sent["attachment"]]
        assert fetch(stack, outer["attachment"]["url"]).content == content


def test_a_repeated_keyed_write_shows_a_file_deleted_since_as_null(stack: Any) -> None:
    payload = files_of_a_document(stack, "gone")
    row = stack.service.dispatch_write(CREATE, payload, ADMIN, idempotency_key="gone-1")
    stack.http.write_ok("archive:write:erase", {"id": str(row["id"])}, ADMIN)
    again = stack.service.dispatch_write(CREATE, payload, ADMIN, idempotency_key="gone-1")
    assert again["id"] == str(row["id"])
    assert (again["attachment"], again["photo"], again["scan"]) == (None, None, None)


def test_a_value_that_looks_like_a_file_gets_no_link_on_a_repeat(stack: Any) -> None:
    # A handler's answer may hold a value shaped like a file (here: from its payload): only
    # the files its reads showed with a link get one again, never what a value claims.
    pdf = uploaded(stack, PDF, "held.pdf", "application/pdf")
    row = stack.http.write_ok(CREATE, {"title": "t", "attachment": pdf["id"]}, ADMIN)
    url = stack.http.query_ok(DETAIL, {"id": str(row["id"])}, ADMIN)["attachment"]["url"]
    stale = stack.service.files.links.url(ADMIN.tenant_id, uuid.UUID(pdf["id"]), now=0)
    echo = {"file": {"id": pdf["id"], "url": stale}}
    first = stack.service.dispatch_write(ECHO, {"value": echo}, ADMIN, idempotency_key="e-1")
    again = stack.service.dispatch_write(ECHO, {"value": echo}, ADMIN, idempotency_key="e-1")
    assert first == again == echo
    assert fetch(stack, url).status_code == 200


def test_forgetting_a_subject_deletes_its_files(stack: Any) -> None:
    pdf = uploaded(stack, PDF, "a.pdf", "application/pdf")
    photo = uploaded(stack, PNG, "p.png", "image/png")
    kept = uploaded(stack, PDF, "kept.pdf", "application/pdf")
    row = stack.http.write_ok(
        CREATE, {"title": "mine", "attachment": pdf["id"], "photo": photo["id"]}, ADMIN
    )
    other = stack.http.write_ok(CREATE, {"title": "other", "attachment": kept["id"]}, ADMIN)
    url = stack.http.query_ok(DETAIL, {"id": str(row["id"])}, ADMIN)["attachment"]["url"]
    assert len(stored_paths(stack)) == 3

    stack.http.write_ok(
        "personal-data:write:forget-subject",
        {"subject": str(row["id"]), "reason": "asked to"},
        OFFICER,
    )
    rows = {str(r.id): r for r in file_rows(stack)}
    for gone in (pdf, photo):
        assert rows[gone["id"]].deleted_at is not None
        assert rows[gone["id"]].purged_at is not None
        assert (rows[gone["id"]].name, rows[gone["id"]].sha256) == ("[forgotten]", "")
    assert rows[kept["id"]].deleted_at is None
    assert [p.name for p in stored_paths(stack)] == [kept["id"]]
    # Its link finds nothing, its row reads no file, and no write may name it again.
    response = fetch(stack, url)
    assert (response.status_code, response.json()["error"]["reason"]) == (404, "file_not_found")
    assert stack.http.query_ok(DETAIL, {"id": str(row["id"])}, ADMIN)["attachment"] is None
    with stack.nothing_written():
        error = stack.http.write_err(CREATE, {"title": "again", "photo": photo["id"]}, ADMIN)
    assert (error.http_status, error.reason, error.details["field"]) == (
        422,
        "file_not_found",
        "photo",
    )
    detail = stack.http.query_ok(DETAIL, {"id": str(other["id"])}, ADMIN)
    assert fetch(stack, detail["attachment"]["url"]).content == PDF


def test_a_rebuild_reproduces_the_file_fields(stack: Any) -> None:
    for title in ("a", "b"):
        pdf = uploaded(stack, PDF, f"{title}.pdf", "application/pdf")
        row = stack.http.write_ok(CREATE, {"title": title, "attachment": pdf["id"]}, ADMIN)
    photo = uploaded(stack, PNG, "p.png", "image/png")
    change = {"id": str(row["id"]), "version": 1, "changes": {"photo": photo["id"]}}
    stack.http.write_ok(UPDATE, change, ADMIN)
    table = stack.tables.entities["archive:document"]
    columns = (table.c.id, table.c.attachment, table.c.photo, table.c.version)

    def raw() -> list[Any]:
        with stack.db.connect() as conn:
            return list(conn.execute(select(*columns).order_by(table.c.id)))

    def without_links(rows: list[Any]) -> list[Any]:
        return [
            {k: ({**v, "url": None} if isinstance(v, dict) else v) for k, v in r.items()}
            for r in rows
        ]

    before, listed = raw(), stack.http.query_ok(LIST, {}, ADMIN)["rows"]
    with stack.db.begin() as conn:
        rebuild_projection(conn, stack.tables, stack.registry.entity("archive:document"))
    assert raw() == before
    assert all(isinstance(r.attachment, uuid.UUID) for r in before)
    again = stack.http.query_ok(LIST, {}, ADMIN)["rows"]
    assert without_links(again) == without_links(listed)


def test_file_fields_declared_wrong_fail_at_definition() -> None:
    cases: list[tuple[Callable[[], Any], str]] = [
        (lambda: fields.file(max_size=0), "max_size= takes a positive number of bytes"),
        (lambda: fields.file(types=["PDF"]), "'PDF', which is no content type"),
        (lambda: fields.image(types=["application/pdf"]), "an image field takes image/png"),
    ]
    for declare, message in cases:
        with pytest.raises(DefinitionError, match=message) as raised:
            Entity(table="bad_files", fields={"upload": declare()})
        assert "field 'upload' of entity 'bad_files'" in str(raised.value)
    with pytest.raises(DefinitionError, match="max_size= and types= apply to file and image"):
        Entity(
            table="bad_files",
            fields={"upload": dataclass_replace(fields.integer(), max_size=10)},
        )
    with pytest.raises(DefinitionError, match="a file field cannot be embedded"):
        Entity(table="bad_files", fields={"box": fields.embedded({"upload": fields.file()})})
    with pytest.raises(DefinitionError, match="neither sortable nor filterable"):
        Entity(
            table="bad_files",
            fields={"upload": dataclass_replace(fields.file(), filterable=True)},
        )
    with pytest.raises(DefinitionError, match="no field of a shared entity is a file"):
        Entity(table="bad_files", shared=True, fields={"upload": fields.image()})


def dataclass_replace(declared: Any, **changes: Any) -> Any:
    """``declared`` with options its constructor does not take (what a hand-made field says)."""
    return dataclasses.replace(declared, **changes)


def test_the_openapi_document_and_the_tool_schemas_describe_file_fields(
    asanoha_stack: Callable[..., Any],
) -> None:
    stack = asanoha_stack(features=[archive], database="sqlite")
    document_ = stack.http.client.get("/openapi.json").json()
    schemas = document_["components"]["schemas"]
    create = next(s for n, s in schemas.items() if n.startswith("DocumentCreatePayload"))
    attachment = create["properties"]["attachment"]["anyOf"][0]
    assert (attachment["type"], attachment["format"]) == ("string", "uuid")
    assert attachment["x-asanoha-file"] == {
        "kind": "file",
        "types": ["application/pdf", "text/*"],
        "max_size": 300,
    }
    photo = create["properties"]["photo"]["anyOf"][0]
    assert photo["x-asanoha-file"]["types"] == [
        "image/png",
        "image/jpeg",
        "image/gif",
        "image/webp",
    ]
    upload_doc = document_["paths"]["/api/files"]["post"]
    assert "multipart/form-data" in upload_doc["requestBody"]["content"]
    assert "201" in upload_doc["responses"]
    assert "/api/files/{file_id}/content" in document_["paths"]
    # The agent tool of the create states the same.
    handler = Registry([archive]).handler(CREATE)
    tool = input_schema(handler.payload_model)
    text = str(tool)
    assert "x-asanoha-file" in text and "application/pdf" in text
    # The write plan names the step and its home.
    plan = stack.app.service.writes.plan_of(handler).describe()
    assert "files" in plan and "service/files.py" in plan


def test_stored_files_are_counted_by_tenant(stack: Any) -> None:
    uploaded(stack, PDF, "a.pdf", "application/pdf")
    uploaded(stack, PDF, "b.pdf", "application/pdf", OTHER)
    files = stack.tables.files
    with stack.db.connect() as conn:
        counted = dict(
            conn.execute(select(files.c.tenant_id, func.count()).group_by(files.c.tenant_id)).all()
        )
    assert counted == {ADMIN.tenant_id: 1, OTHER.tenant_id: 1}
    assert sorted(p.parent.name for p in stored_paths(stack)) == sorted(
        [ADMIN.tenant_id, OTHER.tenant_id]
    )


def test_a_refused_write_attaches_nothing(stack: Any) -> None:
    pdf = uploaded(stack, PDF, "a.pdf", "application/pdf")
    with stack.nothing_written(), pytest.raises(UnprocessableError):
        stack.service.dispatch_write(
            CREATE, {"title": "t", "attachment": pdf["id"], "photo": str(uuid.uuid4())}, ADMIN
        )
    [row] = file_rows(stack)
    assert row.row_id is None and row.entity is None


def test_a_row_forgotten_through_the_executor_or_in_a_batch_loses_its_files(stack: Any) -> None:
    first = uploaded(stack, PDF, "a.pdf", "application/pdf")
    second = uploaded(stack, PNG, "b.png", "image/png")
    one = stack.http.write_ok(CREATE, {"title": "one", "attachment": first["id"]}, ADMIN)
    two = stack.http.write_ok(CREATE, {"title": "two", "photo": second["id"]}, ADMIN)
    stack.http.write_ok("archive:write:erase", {"id": str(one["id"])}, ADMIN)
    assert [p.name for p in stored_paths(stack)] == [second["id"]]
    # A batch item's forget (here the second item's) is purged after the batch commits.
    stack.http.batch_ok(
        [(CREATE, {"title": "three"}), ("archive:write:erase", {"id": str(two["id"])})], ADMIN
    )
    assert stored_paths(stack) == []
    assert all(r.deleted_at is not None and r.purged_at is not None for r in file_rows(stack))


def test_forgetting_a_person_deletes_the_files_of_the_rows_about_them(stack: Any) -> None:
    ada = stack.http.write_ok("archive:write:person:create", {"name": "Ada"}, ADMIN)
    bob = stack.http.write_ok("archive:write:person:create", {"name": "Bob"}, ADMIN)
    hers = uploaded(stack, PDF, "ada.pdf", "application/pdf")
    his = uploaded(stack, PDF, "bob.pdf", "application/pdf")
    for person, evidence in ((ada, hers), (bob, his)):
        claim = {"person": str(person["id"]), "note": "n", "evidence": evidence["id"]}
        stack.http.write_ok("archive:write:claim:create", claim, ADMIN)
    subjects = {str(r.id): r.subject for r in file_rows(stack)}
    assert subjects == {hers["id"]: str(ada["id"]), his["id"]: str(bob["id"])}

    # Her export lists her file (the claim about her holds it), not his.
    exported = stack.http.query_ok(
        "personal-data:query:export-subject", {"subject": str(ada["id"])}, OFFICER
    )
    files = [found for found in exported["values"] if found["table"] == "asanoha_files"]
    assert files == [
        {
            "table": "asanoha_files",
            "id": hers["id"],
            "path": "archive:claim.evidence",
            "value": hers,
        }
    ]
    stack.http.write_ok(
        "personal-data:write:forget-subject", {"subject": str(ada["id"]), "reason": "r"}, OFFICER
    )
    assert [p.name for p in stored_paths(stack)] == [his["id"]]
    deleted = {str(r.id): r.deleted_at is not None for r in file_rows(stack)}
    assert deleted == {hers["id"]: True, his["id"]: False}


def test_a_row_deleted_for_good_takes_its_files_with_it(stack: Any) -> None:
    person = stack.http.write_ok("archive:write:person:create", {"name": "Ada"}, ADMIN)
    evidence = uploaded(stack, PDF, "e.pdf", "application/pdf")
    kept = uploaded(stack, PDF, "k.pdf", "application/pdf")
    claim = stack.http.write_ok(
        "archive:write:claim:create",
        {"person": str(person["id"]), "evidence": evidence["id"]},
        ADMIN,
    )
    stack.http.write_ok(
        "archive:write:claim:create", {"person": str(person["id"]), "evidence": kept["id"]}, ADMIN
    )
    assert len(stored_paths(stack)) == 2
    stack.http.write_ok("archive:write:claim:delete", {"id": str(claim["id"])}, ADMIN)
    rows = {str(r.id): r for r in file_rows(stack)}
    assert rows[evidence["id"]].deleted_at is not None
    assert rows[evidence["id"]].purged_at is not None
    assert rows[kept["id"]].deleted_at is None
    assert [p.name for p in stored_paths(stack)] == [kept["id"]]


@pytest.mark.parametrize("database", ["postgres", "sqlite"])
def test_the_hourly_prune_deletes_uploads_no_write_took(asanoha_stack: Any, database: str) -> None:
    from asanoha.workers.beat import PRUNE_TASK_NAME
    from asanoha.workers.lanes import queue_name

    # A worker runs the prune: the stack needs a job to start one.
    worked = Feature("files-worker")
    worked.job("noop", manual=True)(lambda payload, ctx: None)
    stack = asanoha_stack(
        features=[archive, personal_data.feature, worked],
        database=database,
        jobs=True,
        settings={"file_max_bytes": 1000, "file_types": "application/pdf,image/*,text/*"},
    )
    taken = uploaded(stack, PDF, "taken.pdf", "application/pdf")
    left = uploaded(stack, PDF, "left.pdf", "application/pdf")
    fresh = uploaded(stack, PDF, "fresh.pdf", "application/pdf")
    stack.http.write_ok(CREATE, {"title": "t", "attachment": taken["id"]}, ADMIN)
    long_ago = dt.datetime.now(dt.UTC) - dt.timedelta(hours=25)
    files = stack.tables.files
    with stack.db.begin() as conn:
        conn.execute(
            update(files)
            .where(files.c.id.in_([uuid.UUID(taken["id"]), uuid.UUID(left["id"])]))
            .values(created_at=long_ago)
        )
    queue = queue_name(stack.app.settings.queue_prefix, "worker")
    stack.app.celery.send_task(PRUNE_TASK_NAME, queue=queue)
    stack.drain()
    rows = {str(r.id): r for r in file_rows(stack)}
    assert rows[left["id"]].deleted_at is not None and rows[left["id"]].purged_at is not None
    assert rows[taken["id"]].deleted_at is None and rows[fresh["id"]].deleted_at is None
    assert sorted(p.name for p in stored_paths(stack)) == sorted([taken["id"], fresh["id"]])
    with stack.nothing_written():
        error = stack.http.write_err(CREATE, {"title": "late", "attachment": left["id"]}, ADMIN)
    assert (error.http_status, error.reason) == (422, "file_not_found")
