"""Blobs by content hash in S3 (MinIO): put once, refer to them as s3://bucket/key.

The minio client is synchronous; calls run in a worker thread under a timeout so
the event loop never blocks on the network.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from typing import Any

import urllib3
from minio import Minio
from minio.error import S3Error

from webgym_common.config import S3Settings

# A blob's key ends with its type's extension (infra/minio_users.py grants by it).
EXTENSIONS = {
    "image/png": "png",
    "image/jpeg": "jpg",
    "image/webp": "webp",
    "application/json": "json",
    "text/plain": "txt",
}


# S3 error codes of an object (or bucket) that is not there: waiting will not bring it.
MISSING = frozenset({"NoSuchKey", "NoSuchBucket", "NoSuchObject"})


class ObjectStoreError(RuntimeError):
    pass


class BlobMismatch(ObjectStoreError):
    """A content-addressed blob whose bytes do not hash to its key: altered in the store.
    Never transient: reading it again gives the same bytes."""


@dataclass(frozen=True)
class BlobRef:
    uri: str  # s3://bucket/key
    sha256: str
    size: int


CHECK_FIRST_BYTES = 256 * 1024


def parse_uri(uri: str) -> tuple[str, str]:
    if not uri.startswith("s3://") or "/" not in uri[5:]:
        raise ObjectStoreError(f"not an s3:// reference: {uri!r}")
    bucket, key = uri[5:].split("/", 1)
    return bucket, key


def blob_key(sha256: str, content_type: str) -> str:
    ext = EXTENSIONS.get(content_type, "bin")
    return f"sha256/{sha256[:2]}/{sha256}.{ext}"


class ObjectStore:
    def __init__(self, settings: S3Settings) -> None:
        self.settings = settings
        timeout = urllib3.Timeout(connect=settings.timeout_s, read=settings.timeout_s)
        http = urllib3.PoolManager(
            timeout=timeout, maxsize=16, retries=urllib3.Retry(total=3, backoff_factor=0.2)
        )
        self.client = Minio(
            settings.endpoint,
            access_key=settings.access_key,
            secret_key=settings.secret_key,
            secure=settings.secure,
            region=settings.region,
            http_client=http,
        )
        self.bucket = settings.bucket

    async def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return await asyncio.wait_for(
                asyncio.to_thread(partial(fn, *args, **kwargs)), self.settings.timeout_s * 2
            )
        except TimeoutError:
            raise ObjectStoreError(
                f"object store at {self.settings.endpoint} did not answer in time"
            ) from None

    async def ensure_bucket(self) -> None:
        try:
            exists = await self._call(self.client.bucket_exists, self.bucket)
        except S3Error as err:
            if err.code != "AccessDenied":
                raise
            # A user that may not look at the bucket may not make it either: the store's
            # operator made it with each service's own user (infra/minio_users.py).
            return
        if not exists:
            try:
                await self._call(self.client.make_bucket, self.bucket)
            except S3Error as err:
                if err.code not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                    raise

    async def put_blob(
        self, data: bytes, content_type: str = "application/octet-stream"
    ) -> BlobRef:
        """Store `data` under its sha256; storing the same large bytes twice uploads once."""
        digest = hashlib.sha256(data).hexdigest()
        key = blob_key(digest, content_type)
        ref = BlobRef(f"s3://{self.bucket}/{key}", digest, len(data))
        # Below this size, asking first costs as much as the upload (a round trip on the
        # policy's and the browser's path every step); writing the same bytes again is harmless.
        if len(data) > CHECK_FIRST_BYTES and await self._exists(key):
            return ref
        await self._call(
            self.client.put_object,
            self.bucket,
            key,
            io.BytesIO(data),
            len(data),
            content_type=content_type,
            metadata={"sha256": digest},
        )
        return ref

    async def _exists(self, key: str) -> bool:
        try:
            await self._call(self.client.stat_object, self.bucket, key)
            return True
        except S3Error as err:
            # A writer that may not read (the browser's user) uploads again: same bytes.
            if err.code in ("NoSuchKey", "NoSuchObject", "ResourceNotFound", "AccessDenied"):
                return False
            raise

    async def get_blob(self, uri: str) -> bytes:
        bucket, key = parse_uri(uri)

        def read() -> bytes:
            resp = self.client.get_object(bucket, key)
            try:
                return resp.read()
            finally:
                resp.close()
                resp.release_conn()

        data = await self._call(read)
        if key.startswith("sha256/"):  # content-addressed: its bytes must match its key
            want = key.rsplit("/", 1)[-1].split(".", 1)[0]
            got = hashlib.sha256(data).hexdigest()
            if got != want:
                raise BlobMismatch(f"{uri}: content hash {got} does not match its key")
        return data

    async def presign(self, uri: str, expires_s: int | None = None) -> str:
        bucket, key = parse_uri(uri)
        expiry = timedelta(seconds=expires_s or self.settings.presign_expiry_s)
        return await self._call(self.client.presigned_get_object, bucket, key, expires=expiry)
