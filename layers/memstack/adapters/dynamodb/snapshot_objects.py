"""Packed snapshots of users' partitions as S3 objects: what a cold container loads in one round of GETs.

One object per (user, epoch, write sequence), under a prefix named by a hash
of the partition key (``snapshots/<sha256(tenant#user)>/``), so a user's
erase deletes one prefix and no key shows a user id. Objects are never
overwritten: a compaction writes a new key, points ``META`` at it and then
deletes the old one, so a reader never sees half of two versions.

An object is read as byte ranges of ``part_bytes`` (S3's guidance: 8-16 MB)
fetched on ``connections`` parallel connections, all at once since ``META``
gives the size, into one buffer (no concatenation copy).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from botocore.exceptions import ClientError

from memstack.adapters.dynamodb import items
from memstack.errors import DependencyFailed

PREFIX = "snapshots/"
#: S3's recommended byte-range size
PART_BYTES = 8 * 1024 * 1024
CONNECTIONS = 8
_DELETE_BATCH = 1000  # DeleteObjects' limit
_CHUNK = 1024 * 1024


def user_prefix(tenant: str, user_id: str) -> str:
    digest = hashlib.sha256(items.partition_key(tenant, user_id).encode()).hexdigest()
    return f"{PREFIX}{digest}/"


def object_key(tenant: str, user_id: str, epoch: str, seq: int) -> str:
    return f"{user_prefix(tenant, user_id)}{epoch}/{seq:012d}"


def _missing(exc: ClientError) -> bool:
    return exc.response.get("Error", {}).get("Code") in {"NoSuchKey", "404", "InvalidRange"}


class SnapshotObjects:
    """The snapshot bucket: load (parallel ranged GETs), save, delete one, erase a user's."""

    def __init__(
        self,
        bucket: str,
        client: Any | None = None,
        *,
        region: str | None = None,
        part_bytes: int = PART_BYTES,
        connections: int = CONNECTIONS,
    ) -> None:
        self.bucket = bucket
        self.region = region
        self.part_bytes = part_bytes
        self.connections = connections
        self._client = client
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    @property
    def client(self) -> Any:
        """The boto3 S3 client, created on first use, with a connection per parallel range."""
        if self._client is None:
            import boto3
            from botocore.config import Config

            self._client = boto3.client(
                "s3",
                region_name=self.region,
                config=Config(
                    max_pool_connections=self.connections, retries={"mode": "adaptive", "max_attempts": 8}
                ),
            )
        return self._client

    def _executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.connections, thread_name_prefix="snapshot-get")
            return self._pool

    def load(self, key: str, size: int, *, spare: int = 0) -> np.ndarray | None:
        """The object's ``size`` bytes (then ``spare`` bytes of room, not zeroed), or None when it is
        gone (replaced or erased meanwhile)."""
        return self.start_load(key, size, spare=spare)()

    def start_load(self, key: str, size: int, *, spare: int = 0) -> Callable[[], np.ndarray | None]:
        """``load``, begun: the ranged GETs run on the pool's connections while the caller goes on;
        calling the result waits for them and answers as ``load`` does."""
        buffer = np.empty(size + spare, dtype=np.uint8)  # not zero-filled: every byte is written
        view = buffer.data
        client = self.client  # created before the threads share it

        def fetch(start: int) -> None:
            end = min(start + self.part_bytes, size) - 1
            body = client.get_object(Bucket=self.bucket, Key=key, Range=f"bytes={start}-{end}")["Body"]
            at = start
            for chunk in body.iter_chunks(_CHUNK):  # straight into the buffer, no whole-part copy
                if at + len(chunk) > end + 1:
                    break
                view[at : at + len(chunk)] = chunk
                at += len(chunk)
            if at != end + 1:
                raise DependencyFailed("S3 returned a snapshot part of the wrong size")

        pool = self._executor()
        parts = [pool.submit(fetch, start) for start in range(0, max(size, 1), self.part_bytes)]

        def finish() -> np.ndarray | None:
            try:
                for part in parts:
                    part.result()
            except ClientError as exc:
                if _missing(exc):
                    return None
                raise DependencyFailed(f"S3 read of a snapshot failed: {exc}") from exc
            return buffer

        return finish

    def save(self, key: str, data: bytes) -> None:
        try:
            self.client.put_object(Bucket=self.bucket, Key=key, Body=data)
        except ClientError as exc:
            raise DependencyFailed(f"S3 write of a snapshot failed: {exc}") from exc

    def delete(self, key: str) -> None:
        try:
            self.client.delete_object(Bucket=self.bucket, Key=key)
        except ClientError as exc:
            raise DependencyFailed(f"S3 delete of a snapshot failed: {exc}") from exc

    def keys(self, tenant: str, user_id: str) -> list[str]:
        """Every object of the user (current, superseded, or left by a compaction that failed)."""
        found: list[str] = []
        try:
            pages = self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=user_prefix(tenant, user_id)
            )
            for page in pages:
                found += [o["Key"] for o in page.get("Contents", [])]
        except ClientError as exc:
            raise DependencyFailed(f"S3 listing of snapshots failed: {exc}") from exc
        return found

    def erase(self, tenant: str, user_id: str, *, keep: str | None = None) -> int:
        """Delete the user's objects (all but ``keep``); how many were deleted."""
        doomed = [k for k in self.keys(tenant, user_id) if k != keep]
        for start in range(0, len(doomed), _DELETE_BATCH):
            batch = doomed[start : start + _DELETE_BATCH]
            try:
                response = self.client.delete_objects(
                    Bucket=self.bucket, Delete={"Objects": [{"Key": k} for k in batch], "Quiet": True}
                )
            except ClientError as exc:
                raise DependencyFailed(f"S3 delete of snapshots failed: {exc}") from exc
            if response.get("Errors"):
                raise DependencyFailed(f"S3 kept {len(response['Errors'])} snapshot objects; erase again")
        return len(doomed)
