"""File storage in an S3-compatible bucket (``ASANOHA_FILE_STORAGE=s3``), against a real
S3-compatible HTTP server: moto's ``moto_server``, started as a process of its own on a free
port (installed with the development extras, ``moto[server]``). Nothing of boto3 is
replaced: the platform's client talks HTTP to the server as it would to AWS or MinIO."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from asanoha.handlers import personal_data
from asanoha.testing import TestUsers
from tests.integration.model.test_files import ADMIN, CREATE, DETAIL, OFFICER, PDF, PNG, archive

boto3 = pytest.importorskip(
    "boto3", reason="boto3 is not installed: pip install -e '.[dev]' (it brings asanoha[s3])"
)
pytest.importorskip(
    "moto.server",
    reason="moto[server] is not installed, so no S3-compatible server can run here: "
    "pip install -e '.[dev]'",
)

BUCKET = "asanoha-files-test"
PREFIX = "app/"
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "asanoha-test",
    "AWS_SECRET_ACCESS_KEY": "asanoha-test-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    """A ``moto_server`` process on a free port, stopped after the module."""
    port = free_port()
    server = Path(sys.executable).with_name("moto_server")
    command = [str(server)] if server.exists() else [sys.executable, "-m", "moto.server"]
    process = subprocess.Popen(
        [*command, "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # Started when it accepts connections (bounded: a server that never comes up fails).
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, "moto_server exited at start"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "moto_server did not start within 30 s"
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture
def bucket(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A client of the server with its credentials in the environment, and an empty bucket."""
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    existing = {found["Name"] for found in client.list_buckets()["Buckets"]}
    if BUCKET not in existing:
        client.create_bucket(Bucket=BUCKET)
    for found in client.list_objects_v2(Bucket=BUCKET).get("Contents", []):
        client.delete_object(Bucket=BUCKET, Key=found["Key"])
    return client


@pytest.fixture(params=["postgres", "sqlite"])
def stack(
    request: pytest.FixtureRequest,
    asanoha_stack: Callable[..., Any],
    s3_endpoint: str,
    bucket: Any,
) -> Any:
    return asanoha_stack(
        features=[archive, personal_data.feature],
        database=request.param,
        settings=s3_settings(s3_endpoint),
    )


def s3_settings(endpoint: str, **more: Any) -> dict[str, Any]:
    """Settings of a stack that keeps its files in the test bucket."""
    return {
        "file_storage": "s3",
        "file_s3_bucket": BUCKET,
        "file_s3_prefix": PREFIX,
        "file_s3_endpoint_url": endpoint,
        "file_s3_region": "us-east-1",
        **more,
    }


def keys(client: Any) -> list[str]:
    return sorted(
        found["Key"] for found in client.list_objects_v2(Bucket=BUCKET).get("Contents", [])
    )


def upload(stack: Any, content: bytes, name: str, content_type: str) -> Any:
    response = stack.http.client.post(
        "/api/files",
        files={"file": (name, content, content_type)},
        headers=stack.http.headers_for(ADMIN),
    )
    assert response.status_code == 201, response.text
    return response.json()["data"]


def test_files_live_in_the_bucket_and_a_forget_deletes_them_there(stack: Any, bucket: Any) -> None:
    assert stack.service.files.storage.description == f"s3 {BUCKET}/{PREFIX}"
    pdf = upload(stack, PDF, "a.pdf", "application/pdf")
    photo = upload(stack, PNG, "p.png", "image/png")
    tenant = TestUsers.admin.tenant_id
    assert keys(bucket) == sorted(f"{PREFIX}{tenant}/{f['id']}" for f in (pdf, photo))
    stored = bucket.get_object(Bucket=BUCKET, Key=f"{PREFIX}{tenant}/{pdf['id']}")
    assert stored["Body"].read() == PDF
    assert stored["ContentType"] == "application/pdf"

    row = stack.http.write_ok(CREATE, {"title": "t", "attachment": pdf["id"]}, ADMIN)
    kept = stack.http.write_ok(CREATE, {"title": "k", "photo": photo["id"]}, ADMIN)
    detail = stack.http.query_ok(DETAIL, {"id": str(row["id"])}, ADMIN)
    downloaded = stack.http.client.get(detail["attachment"]["url"])
    assert (downloaded.status_code, downloaded.content) == (200, PDF)

    stack.http.write_ok(
        "personal-data:write:forget-subject", {"subject": str(row["id"]), "reason": "r"}, OFFICER
    )
    assert keys(bucket) == [f"{PREFIX}{tenant}/{photo['id']}"]
    gone = stack.http.client.get(detail["attachment"]["url"])
    assert (gone.status_code, gone.json()["error"]["reason"]) == (404, "file_not_found")
    other = stack.http.query_ok(DETAIL, {"id": str(kept["id"])}, ADMIN)
    assert stack.http.client.get(other["photo"]["url"]).content == PNG


def test_a_refused_upload_leaves_nothing_in_the_bucket(stack: Any, bucket: Any) -> None:
    response = stack.http.client.post(
        "/api/files",
        files={"file": ("fake.png", b"not a png at all", "image/png")},
        headers=stack.http.headers_for(ADMIN),
    )
    assert (response.status_code, response.json()["error"]["reason"]) == (
        415,
        "file_type_not_allowed",
    )
    assert keys(bucket) == []


def test_an_upload_past_the_rate_leaves_nothing_in_the_bucket(
    asanoha_stack: Callable[..., Any], s3_endpoint: str, bucket: Any
) -> None:
    stack = asanoha_stack(
        features=[archive, personal_data.feature],
        database="sqlite",
        settings=s3_settings(s3_endpoint, file_upload_rate="1/minute"),
    )
    first = upload(stack, PDF, "a.pdf", "application/pdf")
    with stack.nothing_written():
        response = stack.http.client.post(
            "/api/files",
            files={"file": ("b.pdf", PDF, "application/pdf")},
            headers=stack.http.headers_for(ADMIN),
        )
    error = response.json()["error"]
    assert (response.status_code, error["code"], error["reason"]) == (
        429,
        "rate_limited",
        "rate_limited",
    )
    assert keys(bucket) == [f"{PREFIX}{TestUsers.admin.tenant_id}/{first['id']}"]
