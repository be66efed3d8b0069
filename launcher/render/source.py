"""The job's source tarball: deterministic bytes, stored in S3 under their own digest.

The same rendered files always give the same tarball, so an unchanged source dir is uploaded
once and every later submit reuses it (a content-addressed code location).
"""
from __future__ import annotations

import gzip
import hashlib
import io
import tarfile
from collections.abc import Mapping
from typing import Any

TARBALL = "sourcedir.tar.gz"


def tarball(files: Mapping[str, str | bytes]) -> bytes:
    """A gzip'd tar of files with fixed order, times and owners, so equal content gives equal bytes."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(files):
            content = files[name]
            data = content.encode() if isinstance(content, str) else content
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0, filename="") as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


def code_uri(code_location: str, data: bytes) -> str:
    digest = hashlib.sha256(data).hexdigest()[:24]
    return f"{code_location.rstrip('/')}/{digest}/{TARBALL}"


def split_s3(uri: str) -> tuple[str, str]:
    bucket, _, key = uri[len("s3://"):].partition("/")
    return bucket, key


def exists(s3: Any, uri: str) -> bool:
    from botocore.exceptions import ClientError

    bucket, key = split_s3(uri)
    try:
        s3.head_object(Bucket=bucket, Key=key)
        return True
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
            return False
        raise


def upload(s3: Any, uri: str, data: bytes, kms_key: str | None = None) -> bool:
    """Put the tarball unless it is already there; True when it was uploaded."""
    if exists(s3, uri):
        return False
    bucket, key = split_s3(uri)
    extra = {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": kms_key} if kms_key else {}
    s3.put_object(Bucket=bucket, Key=key, Body=data, **extra)
    return True
