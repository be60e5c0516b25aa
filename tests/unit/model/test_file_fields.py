"""What a file or image field takes, decided without a database: content type patterns, the
image formats told by their leading bytes, and the signed links' check."""

from __future__ import annotations

import uuid

import pytest

from asanoha import fields
from asanoha.platform.errors import AccessDeniedError
from asanoha.platform.files import FileLinks
from asanoha.platform.model.files import accepts, image_type_of, matches

PNG = b"\x89PNG\r\n\x1a\n\x00\x00"
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF"
GIF = b"GIF89a\x01\x00"
WEBP = b"RIFF\x24\x00\x00\x00WEBPVP8 "


@pytest.mark.parametrize(
    ("pattern", "content_type", "matched"),
    [
        ("*/*", "application/pdf", True),
        ("image/*", "image/png", True),
        ("image/*", "application/png", False),
        ("application/pdf", "application/pdf", True),
        ("application/pdf", "application/pdfx", False),
        ("text/*", "text/plain", True),
    ],
)
def test_a_pattern_names_the_types_it_covers(
    pattern: str, content_type: str, matched: bool
) -> None:
    assert matches(pattern, content_type) is matched


def test_each_image_format_is_told_by_its_leading_bytes() -> None:
    assert [image_type_of(head) for head in (PNG, JPEG, GIF, WEBP)] == [
        "image/png",
        "image/jpeg",
        "image/gif",
        "image/webp",
    ]
    assert image_type_of(b"%PDF-1.7") is None
    assert image_type_of(b"RIFF\x24\x00\x00\x00WAVEfmt ") is None


def test_an_image_field_takes_only_the_image_formats_its_types_allow() -> None:
    image, pngs = fields.image(), fields.image(types=["image/png"])
    assert accepts(image, "image/webp") and not accepts(image, "image/svg+xml")
    assert accepts(pngs, "image/png") and not accepts(pngs, "image/jpeg")
    any_file, pdfs = fields.file(), fields.file(types=["application/pdf"])
    assert accepts(any_file, "image/svg+xml") and accepts(any_file, "application/zip")
    assert accepts(pdfs, "application/pdf") and not accepts(pdfs, "text/plain")


def test_a_link_holds_for_its_file_and_tenant_until_it_expires() -> None:
    links = FileLinks("a-secret-of-at-least-thirty-two-bytes!", ttl_seconds=60)
    file_id = uuid.uuid4()
    url = links.url("acme", file_id)
    query = dict(part.split("=", 1) for part in url.split("?", 1)[1].split("&"))
    expires, signature = int(query["expires"]), query["signature"]
    links.check("acme", file_id, expires, signature)
    refused = [
        ("globex", file_id, expires, signature, "forged"),
        ("acme", uuid.uuid4(), expires, signature, "forged"),
        ("acme", file_id, expires + 1, signature, "forged"),
        ("acme", file_id, expires, "é" * 64, "forged"),
    ]
    for tenant, other_id, until, signed, problem in refused:
        with pytest.raises(AccessDeniedError) as raised:
            links.check(tenant, other_id, until, signed)
        assert (raised.value.reason, raised.value.details["problem"]) == (
            "file_url_invalid",
            problem,
        )
    stale = links.url("acme", file_id, now=0)
    stale_query = dict(part.split("=", 1) for part in stale.split("?", 1)[1].split("&"))
    with pytest.raises(AccessDeniedError) as raised:
        links.check("acme", file_id, int(stale_query["expires"]), stale_query["signature"])
    assert raised.value.details["problem"] == "expired"
    # Another application's key signs other links.
    other = FileLinks("another-secret-of-at-least-thirty-two-bytes", ttl_seconds=60)
    with pytest.raises(AccessDeniedError):
        other.check("acme", file_id, expires, signature)
