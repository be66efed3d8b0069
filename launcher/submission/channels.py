"""Each S3 input channel holds at least one object, read before the job is asked for.

CreateTrainingJob refuses a channel whose prefix matches no object ("No S3 objects found under S3 URL ... given
in input data source", https://github.com/aws/amazon-sagemaker-examples/issues/2489), and a job that got past it
would find nothing to train on. One ListObjectsV2 with MaxKeys 1 per channel says so before anything is paid for:
the prefix exactly as the channel's S3Prefix data source gives it to SageMaker (launcher.plan.request).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from launcher.core.aws import explain
from launcher.core.errors import PreflightError
from launcher.core.sanitize import clean
from launcher.render.source import split_s3

URI_LIMIT = 300  # characters of a channel's URI in a message

# Where each channel comes from in the spec (launcher.plan.build.input_channels).
_FIELDS = {"train": "data.train", "validation": "data.validation"}


class EmptyChannel(PreflightError):
    """An input channel whose S3 prefix holds no object: SageMaker would refuse the job (exit 3)."""


def spec_field(name: str) -> str:
    """The spec field that sets input channel `name`."""
    return _FIELDS.get(name, f"data.channels.{name}")


def check_channels(channels: Mapping[str, str], s3: Any, *, refuse_empty: bool = True) -> list[str]:
    """Refuse (EmptyChannel, exit 3) the first channel whose prefix holds no object; with `refuse_empty` False (a
    pipeline, whose executions may be given other prefixes), say so in a warning instead. A caller who may not list
    the bucket (AccessDenied: the job's role may still read it) gets a warning that it cannot tell, returned; any
    other AWS refusal is explained as every AWS error is."""
    warnings = []
    for name, uri in channels.items():
        bucket, prefix = split_s3(uri)
        try:
            found = s3.list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=1)
        except Exception as exc:
            if _refused(exc):
                warnings.append(f"input channel {name!r}: cannot tell whether {clean(uri, limit=URI_LIMIT)} holds "
                                "objects (s3:ListBucket refused to you)")
                continue
            raise explain(exc, f"listing input channel {name!r} ({clean(uri, limit=URI_LIMIT)})") from None
        if not found.get("KeyCount") and not found.get("Contents"):
            shown = clean(uri, limit=URI_LIMIT)
            if not refuse_empty:
                warnings.append(f"input channel {name!r} ({spec_field(name)}) has no S3 objects under {shown} now: an "
                                "execution with this value would fail; upload the data there or give the execution "
                                "another value")
                continue
            raise EmptyChannel(
                f"input channel {name!r} ({spec_field(name)}) has no S3 objects under {shown} (bucket "
                f"{clean(bucket, limit=URI_LIMIT)}, prefix {clean(prefix, limit=URI_LIMIT) or '(none)'}): "
                f"SageMaker would refuse the job; upload the data there or point {spec_field(name)} at it")
    return warnings


def _refused(exc: Exception) -> bool:
    """Whether S3 refused the caller (AccessDenied, 403), as against the bucket or the call failing."""
    response = getattr(exc, "response", None) or {}
    return str((response.get("Error") or {}).get("Code", "")) in ("AccessDenied", "403", "Forbidden")
