"""The deployment's cursor key (``domain/cursors.py``): never a fixed value anyone can read in the code.

* Locally: 32 random bytes in ``<data dir>/cursor.key`` (mode 0600), made the
  first time any process of this data directory needs it; every process of
  the directory (``memstack serve --workers``, the CLI) reads the same file,
  so a cursor one of them handed out is good in all.
* In AWS: the Secrets Manager secret ``MEMSTACK_CURSOR_SECRET_ARN`` (the stack
  generates it and grants the API function read access); read once per
  container, on the first list request.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path
from typing import Any

from memstack.adapters.aws_errors import as_dependency_failure

KEY_FILE = "cursor.key"
KEY_BYTES = 32


def local_key(data_dir: Path) -> bytes:
    """The key in ``data_dir``, created (atomically: two processes agree) when there is none yet."""
    path = Path(data_dir) / KEY_FILE
    with contextlib.suppress(FileNotFoundError):
        return _read(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    staged = path.with_name(f".{KEY_FILE}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, secrets.token_bytes(KEY_BYTES))
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(staged, path)  # fails if another process made the key first: then that one is the key
    except FileExistsError:
        pass
    finally:
        os.unlink(staged)
    return _read(path)


def _read(path: Path) -> bytes:
    key = path.read_bytes()
    if len(key) < 16:
        raise RuntimeError(f"{path} holds {len(key)} bytes; a cursor key needs at least 16 (delete it)")
    return key


def secrets_manager_key(secret_arn: str, client: Any = None, region: str | None = None) -> bytes:
    """The secret's value (``SecretString`` or ``SecretBinary``) as the key; 503 when unreadable."""
    if client is None:
        import boto3

        client = boto3.client("secretsmanager", region_name=region)
    try:
        answer = client.get_secret_value(SecretId=secret_arn)
    except Exception as exc:
        failure = as_dependency_failure("Secrets Manager", exc)
        if failure is None:
            raise
        raise failure from exc
    value = answer.get("SecretBinary") or answer.get("SecretString", "").encode()
    if len(value) < 16:
        raise RuntimeError("the cursor secret holds fewer than 16 bytes")
    return bytes(value)
