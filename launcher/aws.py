"""The one seam to AWS: every boto3 client comes from here, and every AWS error leaves as a sentence.

Clients honour the profile, the region and AWS_ENDPOINT_URL (so tests and demos can point the whole
tool at an emulator); code takes a `Clients` as an argument so tests inject their own.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from launcher import __version__
from launcher.errors import EXIT_AWS, EXIT_PREFLIGHT, LauncherError


class AwsError(LauncherError):
    """AWS refused or could not be reached (exit 4), in words a person can act on."""

    exit_code = EXIT_AWS


class QuotaError(AwsError):
    exit_code = EXIT_PREFLIGHT


@dataclass
class Clients:
    """Lazily created boto3 clients sharing one session; pass `overrides` to inject test doubles."""

    profile: str | None = None
    region: str | None = None
    env: Mapping[str, str] = field(default_factory=lambda: os.environ)
    max_attempts: int = 5
    overrides: dict[str, Any] = field(default_factory=dict)
    _session: Any = None
    _cache: dict[str, Any] = field(default_factory=dict)

    @property
    def session(self):
        if self._session is None:
            import boto3

            self._session = boto3.Session(profile_name=self.profile or self.env.get("AWS_PROFILE") or None,
                                          region_name=self.region)
        return self._session

    def client(self, service: str):
        if service in self.overrides:
            return self.overrides[service]
        if service not in self._cache:
            from botocore.config import Config

            config = Config(retries={"mode": "standard", "max_attempts": self.max_attempts},
                            user_agent_extra=f"smp-launch/{__version__}", connect_timeout=10, read_timeout=60)
            kwargs: dict[str, Any] = {"config": config}
            endpoint = self.env.get("AWS_ENDPOINT_URL")
            if endpoint:
                kwargs["endpoint_url"] = endpoint
            try:
                self._cache[service] = self.session.client(service, **kwargs)
            except Exception as exc:  # NoRegionError, ProfileNotFound, ...
                raise explain(exc) from None
        return self._cache[service]

    def __getattr__(self, name: str):
        services = {"sagemaker": "sagemaker", "logs": "logs", "s3": "s3", "iam": "iam", "sts": "sts",
                    "cloudwatch": "cloudwatch", "service_quotas": "service-quotas"}
        if name in services:
            return self.client(services[name])
        raise AttributeError(name)


_ACTIONABLE = {
    "ExpiredToken": "your AWS session token has expired; refresh your credentials (e.g. `aws sso login`) and retry",
    "ExpiredTokenException": "your AWS session token has expired; refresh your credentials and retry",
    "InvalidClientTokenId": "AWS does not recognise these credentials; check AWS_PROFILE or your access key",
    "UnrecognizedClientException": "AWS does not recognise these credentials; check AWS_PROFILE or your access key",
    "SignatureDoesNotMatch": "the secret access key does not match the key id; check your credentials",
    "ThrottlingException": "AWS is throttling this account's requests (a shared quota); wait a minute and retry",
    "Throttling": "AWS is throttling this account's requests (a shared quota); wait a minute and retry",
    "NoSuchBucket": "the S3 bucket does not exist; create it or fix output.path in the spec",
}


def explain(exc: BaseException, action: str = "") -> LauncherError:
    """Turn a botocore exception into a one-line LauncherError that says what to do."""
    from botocore import exceptions as bx

    where = f"{action}: " if action else ""
    if isinstance(exc, LauncherError):
        return exc
    if isinstance(exc, bx.NoCredentialsError):
        return AwsError(f"{where}no AWS credentials found; set AWS_PROFILE, run `aws configure`, "
                        "or export AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
    if isinstance(exc, bx.NoRegionError):
        return AwsError(f"{where}no AWS region; set cluster.region in the spec, AWS_REGION, or a profile region")
    if isinstance(exc, bx.ProfileNotFound):
        return AwsError(f"{where}{exc}; check AWS_PROFILE and ~/.aws/config")
    if isinstance(exc, (bx.EndpointConnectionError, bx.ConnectTimeoutError, bx.ReadTimeoutError)):
        return AwsError(f"{where}cannot reach AWS ({exc}); check the network, the region and AWS_ENDPOINT_URL")
    if isinstance(exc, bx.ClientError):
        err = exc.response.get("Error", {})
        code, message = str(err.get("Code", "")), str(err.get("Message", "")).strip()
        op = getattr(exc, "operation_name", "") or "the request"
        if code in _ACTIONABLE:
            return AwsError(f"{where}{_ACTIONABLE[code]} ({op}: {code})")
        if code in ("AccessDenied", "AccessDeniedException", "403") or "not authorized" in message:
            return AwsError(f"{where}access denied for {op}: {message or code}. Ask for this permission on your "
                            "identity (check with `aws sts get-caller-identity`)")
        if code == "ResourceLimitExceeded":
            return QuotaError(f"{where}{message or 'a SageMaker quota was exceeded'}. Request an increase in "
                              "Service Quotas (service: Amazon SageMaker; quota: '<instance type> for training "
                              "job usage') or lower cluster.instance_count")
        if code == "ValidationException":
            return AwsError(f"{where}SageMaker rejected the request: {message}")
        return AwsError(f"{where}{op} failed: {code}: {message}")
    if isinstance(exc, bx.BotoCoreError):
        return AwsError(f"{where}{exc}")
    return AwsError(f"{where}{type(exc).__name__}: {exc}")
