"""``S3Storage``: the content of files in a bucket of an S3-compatible store, through boto3
(AWS S3, MinIO, Ceph, Cloudflare R2, ...). Needs the extra ``asanoha[s3]``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, BinaryIO

from asanoha.platform.errors import DefinitionError
from asanoha.platform.files.storage import CHUNK_BYTES
from asanoha.platform.settings import Settings


class S3Storage:
    """Files as objects ``<prefix><key>`` of one bucket."""

    def __init__(self, client: Any, bucket: str, prefix: str = "") -> None:
        self._client = client
        self.bucket = bucket
        self.prefix = prefix
        self.description = f"s3 {bucket}/{prefix}"

    @classmethod
    def from_settings(cls, settings: Settings) -> S3Storage:
        """The storage ``ASANOHA_FILE_S3_*`` describe; credentials come from boto3's own
        configuration (``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``, a profile, a role)."""
        if not settings.file_s3_bucket:
            raise DefinitionError(
                "ASANOHA_FILE_STORAGE=s3 needs ASANOHA_FILE_S3_BUCKET: the bucket the files go to"
            )
        try:
            import boto3
        except ImportError:
            raise DefinitionError(
                "ASANOHA_FILE_STORAGE=s3 stores files through boto3: pip install 'asanoha[s3]'"
            ) from None
        client = boto3.client(
            "s3",
            endpoint_url=settings.file_s3_endpoint_url,
            region_name=settings.file_s3_region,
        )
        return cls(client, settings.file_s3_bucket, settings.file_s3_prefix)

    def _key(self, key: str) -> str:
        return f"{self.prefix}{key}"

    def put(self, key: str, content: BinaryIO, *, size: int, content_type: str) -> None:
        """See ``FileStorage.put``: a multipart upload for large content (boto3's transfer)."""
        content.seek(0)
        self._client.upload_fileobj(
            content, self.bucket, self._key(key), ExtraArgs={"ContentType": content_type}
        )

    def read(self, key: str) -> Iterator[bytes]:
        """See ``FileStorage.read``."""
        try:
            found = self._client.get_object(Bucket=self.bucket, Key=self._key(key))
        except self._client.exceptions.NoSuchKey:
            raise FileNotFoundError(key) from None
        body = found["Body"]

        def chunks() -> Iterator[bytes]:
            try:
                yield from body.iter_chunks(CHUNK_BYTES)
            finally:
                body.close()

        return chunks()

    def delete(self, key: str) -> None:
        """See ``FileStorage.delete`` (S3 answers a delete of a missing key as done)."""
        self._client.delete_object(Bucket=self.bucket, Key=self._key(key))
