"""Submit: validate, advise, check the role, render, upload, start. The only writer to AWS.

Everything that only reads runs first (and is all `--dry-run` does); the writes are an idempotent
content-addressed upload of the source tarball and one CreateTrainingJob through the SDK.
"""
from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from launcher.aws import AwsError, Clients, explain
from launcher.errors import LauncherError
from launcher.iam import FAIL, UNKNOWN, RoleCheck, RoleRefused, check_role, role_name
from launcher.plan import Plan, blocking_errors, build_plan, require_region
from launcher.request import stage
from launcher.source import split_s3, upload
from launcher.spec.loader import LoadedSpec


@dataclass
class Prepared:
    """A plan plus everything submit resolved by reading: the role's ARN, the source tarball."""

    plan: Plan
    files: dict[str, str]
    data: bytes
    source_uri: str
    role_arn: str
    role_check: RoleCheck | None
    request: dict[str, Any]
    warnings: list[str] = field(default_factory=list)


@dataclass
class Submitted:
    job_name: str
    region: str
    console_url: str
    source_uri: str
    uploaded: bool
    dry_run: bool
    aws_calls: list[str]
    role: dict[str, Any] | None
    warnings: list[str]
    request: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def console_url(region: str, job: str) -> str:
    return f"https://{region}.console.aws.amazon.com/sagemaker/home?region={region}#/jobs/{job}"


def _check_bucket(s3: Any, uri: str, region: str, what: str) -> None:
    from botocore.exceptions import ClientError

    bucket, _ = split_s3(uri)
    try:
        location = s3.get_bucket_location(Bucket=bucket).get("LocationConstraint") or "us-east-1"
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        if code == "NoSuchBucket":
            raise AwsError(f"{what} bucket {bucket} does not exist; create it in {region} "
                           f"(`aws s3 mb s3://{bucket} --region {region}`) or change the spec") from None
        raise explain(exc, f"checking bucket {bucket}") from None
    if location == "EU":
        location = "eu-west-1"
    if location != region:
        raise AwsError(f"{what} bucket {bucket} is in {location} but the job runs in {region}; SageMaker "
                       f"needs them in one region: use a bucket in {region} or set cluster.region: {location}")


def _role_arn(plan: Plan, clients: Clients) -> str:
    if plan.role.startswith("arn:"):
        return plan.role
    try:
        return clients.iam.get_role(RoleName=role_name(plan.role))["Role"]["Arn"]
    except Exception as exc:
        raise explain(exc, f"looking up role {plan.role}") from None


def prepare(loaded: LoadedSpec, clients: Clients, *, skip_role_check: bool = False,
            now: datetime | None = None, warn: Callable[[str], None] | None = None) -> Prepared:
    """Everything submit does that only reads: the plan, the rules, the role, the buckets, the tarball."""
    warn = warn or (lambda m: print(f"warning: {m}", file=sys.stderr))
    plan = build_plan(loaded, now=now, env=clients.env)
    refused = blocking_errors(loaded, plan)
    if refused:
        raise refused
    region = require_region(plan)
    clients.region = clients.region or region
    if not plan.role:
        from launcher.errors import UsageError

        raise UsageError(f"{loaded.file}: no IAM role: set `role:` in the spec or export SMP_LAUNCH_ROLE "
                         "(a role name or ARN)")
    warnings: list[str] = []
    check = None
    try:
        buckets = {"output": plan.estimator["output_path"], "code": plan.estimator["code_location"],
                   **{f"input channel {name!r}": uri for name, uri in plan.channels.items()}}
        seen = set()
        for what, uri in buckets.items():
            if split_s3(uri)[0] not in seen:
                seen.add(split_s3(uri)[0])
                _check_bucket(clients.s3, uri, region, what)
        if skip_role_check:
            role_arn = _role_arn(plan, clients)
        else:
            check = check_role(plan, clients.iam, clients.sts)
            if check.verdict == FAIL:
                raise RoleRefused("\n".join(check.lines()))
            if check.verdict == UNKNOWN:
                for u in check.unknowns:
                    warnings.append(f"role check: cannot tell: {u}")
            role_arn = check.role_arn or _role_arn(plan, clients)
    except LauncherError:
        raise
    except Exception as exc:
        raise explain(exc) from None
    for w in warnings:
        warn(w)
    staged = stage(loaded, plan, role_arn)
    return Prepared(plan, staged.files, staged.data, staged.source_uri, role_arn, check, staged.request, warnings)


def submit(loaded: LoadedSpec, clients: Clients, *, dry_run: bool = False, skip_role_check: bool = False,
           now: datetime | None = None, warn: Callable[[str], None] | None = None,
           start: Callable[..., str] | None = None) -> Submitted:
    """Prepare, then (unless dry_run) upload the tarball if new and start the job."""
    calls: list[str] = []
    clients.session.events.register("before-call.*.*", lambda model, **_: calls.append(
        f"{model.service_model.service_name}.{model.name}"))
    prepared = prepare(loaded, clients, skip_role_check=skip_role_check, now=now, warn=warn)
    plan = prepared.plan
    uploaded = False
    if not dry_run:
        from launcher import state

        try:
            uploaded = upload(clients.s3, prepared.source_uri, prepared.data, plan.estimator.get("output_kms_key"))
        except Exception as exc:
            raise explain(exc, "uploading the source tarball") from None
        if start is None:
            from launcher.backends import estimator as start_module

            start = start_module.start
        try:
            start(plan, prepared.source_uri, prepared.role_arn, clients.session, clients.sagemaker)
        except LauncherError:
            raise
        except Exception as exc:
            if type(exc).__module__.startswith("botocore"):
                raise explain(exc, "CreateTrainingJob") from None
            raise LauncherError(f"the SageMaker SDK refused the job: {exc}") from None
        state.record_submitted(plan.job_name, plan.region, clients.env)
    return Submitted(job_name=plan.job_name, region=plan.region, console_url=console_url(plan.region, plan.job_name),
                     source_uri=prepared.source_uri, uploaded=uploaded, dry_run=dry_run, aws_calls=calls,
                     role=prepared.role_check.as_dict() if prepared.role_check else None,
                     warnings=prepared.warnings, request=prepared.request)


