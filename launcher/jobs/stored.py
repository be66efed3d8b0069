"""What a launched job stored: its source tarball in S3 and the plan.json and spec.json inside it.

Every job smp-launch starts carries its source tarball (the PyTorch Estimator names it in the hyperparameter
`sagemaker_submit_directory`, ModelTrainer as the `code` input channel), and the tarball holds `plan.json`
(the plan, job name scrubbed, secrets redacted) and `spec.json` (the validated spec, secrets redacted): a job is
its own record. This is the one reader of it, for the failure remedies and for `rerun` and `diff`. Everything
read from AWS is hostile input: the tarball's bytes, its members and the stored JSON's size and depth are
bounded before use, no member is written to disk and no link is followed.
"""
from __future__ import annotations

import io
import json
import tarfile
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from launcher.core.aws import read_body
from launcher.core.sanitize import PLACE_LIMIT, clean

MAX_TARBALL = 64 * 1024 * 1024  # bytes read from S3, and bytes unpacked: a rendered source dir is tens of KB
MAX_MEMBERS = 1000  # a source dir holds about ten files
MAX_JSON = 1024 * 1024  # plan.json and spec.json are a few KB
MAX_DEPTH = 64  # levels of nesting in plan.json or spec.json (a plan nests about six)
STORED = ("plan.json", "spec.json")
CODE_CHANNEL = "code"  # ModelTrainer's channel for the job's source (launcher.plan.request.MT_CODE_CHANNEL)


class Unreadable(ValueError):
    """The job's stored source cannot be read back; the message says why ("its source has no plan.json")."""


@dataclass(frozen=True)
class StoredSource:
    """A job's source tarball (its URI, bytes and regular files) and the plan and spec stored in it."""

    uri: str
    tarball: bytes
    files: Mapping[str, bytes]
    plan: dict[str, Any]
    spec: dict[str, Any] | None  # None for a job launched before the spec was stored


def submit_directory(description: Mapping[str, Any]) -> str | None:
    """The job's source tarball URI, as either backend names it: the PyTorch Estimator's hyperparameter
    `sagemaker_submit_directory` (JSON-quoted by the SDK), or ModelTrainer's `code` input channel. None when
    the job names none, or names something that is not an S3 tarball."""
    raw = (description.get("HyperParameters") or {}).get("sagemaker_submit_directory")
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw
    else:
        channels = [c for c in description.get("InputDataConfig") or () if isinstance(c, Mapping)]
        code = next((c for c in channels if c.get("ChannelName") == CODE_CHANNEL), {})
        value = ((code.get("DataSource") or {}).get("S3DataSource") or {}).get("S3Uri")
    return value if isinstance(value, str) and value.startswith("s3://") and value.endswith(".tar.gz") else None


def gunzip(data: bytes, limit: int = MAX_TARBALL) -> bytes:
    """The bytes a gzip stream unpacks to, refused (ValueError) past `limit`: a few KB of gzip can stand for
    gigabytes (a tar header naming a huge "long name" is read whole by tarfile), so nothing is unpacked
    beyond the bound."""
    out: list[bytes] = []
    size = 0
    rest = data
    while rest:
        unpack = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            chunk = unpack.decompress(rest, limit - size + 1)
        except zlib.error as exc:
            raise ValueError(f"not gzip data ({exc})") from None
        size += len(chunk)
        if size > limit or unpack.unconsumed_tail:
            raise ValueError(f"the tarball unpacks to more than {limit // 2**20} MiB")
        if not unpack.eof:
            raise ValueError("the gzip data ends early")
        out.append(chunk)
        rest = unpack.unused_data  # a gzip file may hold several members, one after the other
    return b"".join(out)


def read_files(data: bytes) -> dict[str, bytes]:
    """The regular files of a gzip'd tarball by name, bounded in unpacked bytes and members (ValueError past
    either); links and other non-files are left out."""
    files: dict[str, bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(gunzip(data)), mode="r:") as tar:
        for count, member in enumerate(tar, 1):
            if count > MAX_MEMBERS:
                raise ValueError(f"the tarball holds more than {MAX_MEMBERS} members")
            if member.isfile():
                handle = tar.extractfile(member)
                if handle is not None:
                    files[member.name.removeprefix("./")] = handle.read()
    return files


def _depth(value: Any) -> int:
    """How deeply a parsed JSON value nests (a scalar is 0), without recursion."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (dict, list)):
            level += 1
            deepest = max(deepest, level)
            stack.extend((child, level) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def parse_stored(name: str, data: bytes) -> dict[str, Any]:
    """One stored JSON file (plan.json, spec.json) as a dict; Unreadable when it is too large, not JSON,
    nested too deeply or not an object."""
    if len(data) > MAX_JSON:
        raise Unreadable(f"its {name} is larger than 1 MiB")
    try:
        value = json.loads(data)
    except RecursionError:
        raise Unreadable(f"its {name} nests deeper than {MAX_DEPTH} levels") from None
    except ValueError:
        raise Unreadable(f"its {name} is not JSON") from None
    if not isinstance(value, dict):
        raise Unreadable(f"its {name} is not a JSON object")
    if _depth(value) > MAX_DEPTH:
        raise Unreadable(f"its {name} nests deeper than {MAX_DEPTH} levels")
    return value


def read_source(s3: Any, uri: str) -> StoredSource:
    """The source tarball at `uri` and the plan (and spec) stored in it. Raises Unreadable (why) for what
    is not a source smp-launch wrote; S3's own errors (no such key, access denied) pass through."""
    from launcher.render.source import split_s3

    bucket, key = split_s3(uri)
    obj = s3.get_object(Bucket=bucket, Key=key)
    too_big = Unreadable(f"its source {clean(uri, PLACE_LIMIT)} is larger than 64 MiB")
    if int(obj.get("ContentLength") or 0) > MAX_TARBALL:
        raise too_big
    data = read_body(obj["Body"], MAX_TARBALL + 1, what=f"s3://{bucket}/{key}")
    if len(data) > MAX_TARBALL:
        raise too_big
    try:
        files = read_files(data)
    except (tarfile.TarError, OSError, EOFError, ValueError) as exc:
        raise Unreadable(f"its source is not a readable tarball: {clean(exc, PLACE_LIMIT)}") from None
    if "plan.json" not in files:
        raise Unreadable("its source has no plan.json")
    stored = {name: parse_stored(name, files[name]) for name in STORED if name in files}
    return StoredSource(uri=uri, tarball=data, files=files, plan=stored["plan.json"], spec=stored.get("spec.json"))
