"""The bucket check: every bucket a job reads or writes exists, in the job's region (SageMaker needs both in one)."""
from __future__ import annotations

from typing import Any

from launcher.core.aws import explain
from launcher.core.errors import PreflightError
from launcher.render.source import split_s3


class BucketMissing(PreflightError):
    """A bucket the job names does not exist, or is in another region than the job (exit 3)."""


def check_bucket(s3: Any, uri: str, region: str, what: str) -> None:
    """Raise BucketMissing when `uri`'s bucket is not in `region`; any other refusal is explain()'s (exit 4)."""
    from botocore.exceptions import ClientError

    bucket, _ = split_s3(uri)
    try:
        location = s3.get_bucket_location(Bucket=bucket).get("LocationConstraint") or "us-east-1"
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        if code == "NoSuchBucket":
            raise BucketMissing(f"{what} bucket {bucket} does not exist; create it in {region} "
                                f"(`aws s3 mb s3://{bucket} --region {region}`) or change the spec") from None
        raise explain(exc, f"checking bucket {bucket}") from None
    if location == "EU":
        location = "eu-west-1"
    if location != region:
        raise BucketMissing(f"{what} bucket {bucket} is in {location} but the job runs in {region}; SageMaker "
                            f"needs them in one region: use a bucket in {region} or set cluster.region: {location}")
