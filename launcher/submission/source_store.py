"""Where a job's code goes in S3: under a content-addressed key, reused only when the object there holds the very
bytes the plan would upload.

The key of a source tarball (`<code location>/<digest>/sourcedir.tar.gz`, launcher.render.source.code_uri) and
the folder of a pipeline step's ModelTrainer drivers (`<code location>/<digest>/sm_drivers`,
launcher.orchestrate.pipeline_v3) are named after their content, so an object already there is normally the same
content. Normally is not always: anyone who may write the bucket can put other bytes at that key, and a job started
on them would run code the plan never showed. So an object is reused only after its bytes are compared with the
plan's (its size first, then the bytes themselves: S3's metadata and ETag are written by whoever wrote the object,
and a multipart ETag is not a digest of the content). Another's object is left as it is, and the plan's bytes go
to the next free key of the same name with `-1`, `-2`, ... after the digest folder, which the job then names; a
later submit of the same source finds that copy the same way.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from launcher.core.aws import read_body
from launcher.core.errors import LauncherError
from launcher.core.sanitize import PLACE_LIMIT, clean
from launcher.render.source import split_s3

if TYPE_CHECKING:
    from launcher.plan.build import Plan

ALTERNATES = 4  # keys tried after the content-addressed one before giving up
FOLDER_FILES_MAX = 1000  # a drivers folder holds a dozen files; more under the prefix is other content


class SourceTaken(LauncherError):
    """Every key the plan's code may go to holds other content (exit 1): nothing was uploaded or started."""


def candidates(uri: str) -> list[str]:
    """The content-addressed URI, then its alternates: `<parent>-<n>/<leaf>` for n = 1..ALTERNATES."""
    parent, _, leaf = uri.rstrip("/").rpartition("/")
    return [uri] + [f"{parent}-{n}/{leaf}" for n in range(1, ALTERNATES + 1)]


def holds(s3: Any, uri: str, data: bytes) -> bool | None:
    """Whether the object at `uri` holds exactly `data`: None when there is no object, False when it holds anything
    else. S3's errors other than "no such key" pass through."""
    from botocore.exceptions import ClientError

    bucket, key = split_s3(uri)
    try:
        head = s3.head_object(Bucket=bucket, Key=key)
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
            return None
        raise
    if int(head.get("ContentLength") or 0) != len(data):
        return False
    body = s3.get_object(Bucket=bucket, Key=key)["Body"]
    return read_body(body, len(data) + 1, what=uri) == data


def folder_holds(s3: Any, folder: str, files: Mapping[str, bytes]) -> bool | None:
    """Whether the folder at `folder` holds exactly `files` (relative name -> bytes) and nothing else: a channel
    reads every object under its prefix. None when nothing is there."""
    bucket, prefix = split_s3(folder.rstrip("/") + "/")
    found: list[str] = []
    token = None
    while True:
        page = s3.list_objects_v2(Bucket=bucket, Prefix=prefix, **({"ContinuationToken": token} if token else {}))
        found += [str(o["Key"])[len(prefix):] for o in page.get("Contents") or ()]
        token = page.get("NextContinuationToken")
        if not token or len(found) > FOLDER_FILES_MAX:
            break
    if not found:
        return None
    if sorted(found) != sorted(files):
        return False
    return all(holds(s3, f"{folder.rstrip('/')}/{name}", files[name]) for name in sorted(files))


def locate(uris: list[str], check: Any, what: str) -> tuple[str, bool, list[str]]:
    """The first of `uris` whose object is absent or already right (`check(uri)`: None, True or False): the URI,
    whether it is there already, and the URIs passed over because they hold other content."""
    passed: list[str] = []
    for uri in uris:
        found = check(uri)
        if found is None or found:
            return uri, bool(found), passed
        passed.append(uri)
    raise SourceTaken(f"{clean(uris[0], PLACE_LIMIT)} and its {len(uris) - 1} alternates each hold other content "
                      f"than this {what}; nothing was uploaded or started. Remove those objects, or name another "
                      "code location (output.code_path)")


def moved_note(passed: list[str], uri: str, what: str) -> str | None:
    """The warning for a plan whose code went to an alternate key (None when it did not)."""
    if not passed:
        return None
    return (f"{clean(passed[0], PLACE_LIMIT)} holds other content than this {what} (not ours, or not whole): it was "
            f"left as it is, and the {what} went to {clean(uri, PLACE_LIMIT)}")


@dataclasses.dataclass(frozen=True)
class Placed:
    """Where a plan's tarball is (or would be) in S3: the plan naming it, whether it was there already, a note."""

    plan: Plan
    present: bool
    note: str | None


def place(s3: Any, plan: Plan) -> Placed:
    """Find where the plan's tarball goes (no write): the plan re-pointed there when that is not its
    content-addressed key."""
    source = plan.source
    uri, present, passed = locate(candidates(source.uri), lambda u: holds(s3, u, source.tarball), "source tarball")
    if uri != source.uri:
        plan = plan.with_source(dataclasses.replace(source, uri=uri))
    return Placed(plan, present, moved_note(passed, uri, "source tarball"))


def upload(s3: Any, placed: Placed, kms_key: str | None = None) -> bool:
    """Put the placed plan's tarball unless it is there already; True when it was uploaded."""
    if placed.present:
        return False
    source = placed.plan.source
    bucket, key = split_s3(source.uri)
    extra = {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": kms_key} if kms_key else {}
    s3.put_object(Bucket=bucket, Key=key, Body=source.tarball, **extra)
    return True


def store(s3: Any, plan: Plan) -> tuple[Plan, bool, str | None]:
    """Place the plan's tarball and upload it if needed: (the plan naming where it is, uploaded, a note)."""
    placed = place(s3, plan)
    return placed.plan, upload(s3, placed, plan.estimator.output_kms_key), placed.note
