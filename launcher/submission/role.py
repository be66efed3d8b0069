"""The role check: can this role run this job, and may the caller hand it to SageMaker?

Three verdicts, like SDK v3's role resolver: pass; fail (blocks submit, lists each missing action
and resource); unknown (the caller may not simulate, or IAM does not answer): warn and go on.
It only reads IAM; it never creates or widens a policy.
"""
from __future__ import annotations

import json
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from launcher.catalog.smp import SMP_IMAGE_ACCOUNT, SMP_IMAGE_REPOSITORY
from launcher.core.enums import StrEnum
from launcher.core.errors import PreflightError, UsageError
from launcher.core.frozen import freeze, thaw
from launcher.core.names import LOG_GROUP
from launcher.plan.build import Plan
from launcher.render.source import split_s3

SAGEMAKER_PRINCIPAL = "sagemaker.amazonaws.com"
VPC_ACTIONS = ("ec2:CreateNetworkInterface", "ec2:CreateNetworkInterfacePermission", "ec2:DeleteNetworkInterface",
               "ec2:DeleteNetworkInterfacePermission", "ec2:DescribeNetworkInterfaces", "ec2:DescribeVpcs",
               "ec2:DescribeDhcpOptions", "ec2:DescribeSubnets", "ec2:DescribeSecurityGroups")


class RoleRefused(PreflightError):
    """The role check's definite no: the role is missing, not trusted by SageMaker, or lacks a permission."""


class RoleVerdict(StrEnum):
    """What the role check concluded: PASS, FAIL (blocks submit) or UNKNOWN (IAM could not tell: warn)."""

    PASS = "pass"
    FAIL = "fail"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class RoleCheck:
    """The role check's result; `missing` holds one read-only {action, resource, decision} per refusal."""

    role: str
    role_arn: str | None = None
    verdict: RoleVerdict = RoleVerdict.PASS
    missing: tuple[Mapping[str, str], ...] = ()
    problems: tuple[str, ...] = ()
    unknowns: tuple[str, ...] = ()
    checked: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "verdict", RoleVerdict(self.verdict))
        for name in ("missing", "problems", "unknowns"):
            object.__setattr__(self, name, freeze(getattr(self, name)))

    def as_dict(self) -> dict[str, Any]:
        """Plain data, with every string that came from IAM made safe to print (sanitize.clean_data)."""
        from launcher.core.sanitize import clean_data

        data = clean_data({"role": self.role, "role_arn": self.role_arn, "verdict": self.verdict.value,
                           "missing": thaw(self.missing), "problems": list(self.problems),
                           "unknowns": list(self.unknowns), "actions_checked": self.checked})
        assert isinstance(data, dict)
        return data

    def lines(self) -> list[str]:
        from launcher.core.sanitize import clean

        out = [f"role {self.role_arn or self.role}: {self.verdict}"]
        out += [f"  {p}" for p in self.problems]
        out += [f"  missing {m['action']} on {m['resource']} ({m['decision']})" for m in self.missing]
        out += [f"  cannot tell: {u}" for u in self.unknowns]
        return [clean(line) for line in out]


@dataclass
class _Findings:
    """What a role check has found so far; `result` freezes it into the RoleCheck it returns."""

    role: str
    role_arn: str | None = None
    missing: list[dict[str, str]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    unknowns: list[str] = field(default_factory=list)
    checked: int = 0

    def result(self, verdict: RoleVerdict | None = None) -> RoleCheck:
        """The frozen result; without `verdict`: FAIL for any problem or refusal, else UNKNOWN for anything
        IAM could not answer, else PASS."""
        if verdict is None:
            verdict = (RoleVerdict.FAIL if self.problems or self.missing
                       else RoleVerdict.UNKNOWN if self.unknowns else RoleVerdict.PASS)
        return RoleCheck(role=self.role, role_arn=self.role_arn, verdict=verdict, missing=tuple(self.missing),
                         problems=tuple(self.problems), unknowns=tuple(self.unknowns), checked=self.checked)


def role_name(role: str) -> str:
    return role.rsplit("/", 1)[-1]


def required_permissions(plan: Plan, account: str) -> list[tuple[str, tuple[str, ...]]]:
    """(resource ARN, actions) pairs this job needs, on the exact resources it touches."""
    region, est = plan.region, plan.estimator
    needs: list[tuple[str, tuple[str, ...]]] = []

    def s3_read(uri: str) -> None:
        bucket, key = split_s3(uri)
        needs.append((f"arn:aws:s3:::{bucket}/{key.rstrip('/')}/*" if key else f"arn:aws:s3:::{bucket}/*",
                      ("s3:GetObject",)))
        needs.append((f"arn:aws:s3:::{bucket}", ("s3:ListBucket",)))

    def s3_write(uri: str, read_too: bool = False) -> None:
        bucket, key = split_s3(uri)
        actions = ("s3:PutObject", "s3:GetObject") if read_too else ("s3:PutObject",)
        needs.append((f"arn:aws:s3:::{bucket}/{key.rstrip('/')}/*" if key else f"arn:aws:s3:::{bucket}/*", actions))
        needs.append((f"arn:aws:s3:::{bucket}", ("s3:ListBucket",)))

    for uri in plan.channels.values():
        s3_read(uri)
    s3_read(est.code_location)
    s3_write(est.output_path)
    s3_write(est.checkpoint_s3_uri, read_too=True)
    needs.append((f"arn:aws:logs:{region}:{account}:log-group:{LOG_GROUP}:*",
                  ("logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams")))
    needs.append(("*", ("cloudwatch:PutMetricData", "ecr:GetAuthorizationToken")))
    image = plan.framework.image_uri or ""
    repo_account = image.split(".", 1)[0] if image else SMP_IMAGE_ACCOUNT
    repo = image.split("/", 1)[1].split(":")[0].split("@")[0] if "/" in image else SMP_IMAGE_REPOSITORY
    needs.append((f"arn:aws:ecr:{region}:{repo_account}:repository/{repo}",
                  ("ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability")))
    kms = est.output_kms_key
    if kms:
        name = kms if kms.startswith("alias/") else f"key/{kms}"
        key_arn = kms if kms.startswith("arn:") else f"arn:aws:kms:{region}:{account}:{name}"
        needs.append((key_arn, ("kms:Decrypt", "kms:GenerateDataKey", "kms:CreateGrant")))
    if est.subnets:
        needs.append(("*", VPC_ACTIONS))
    for arn in plan.secrets.values():  # read by train_secrets.py when the job starts
        needs.append((arn, ("secretsmanager:GetSecretValue",)))
    merged: dict[str, list[str]] = {}
    for resource, actions in needs:
        merged.setdefault(resource, [])
        merged[resource] += [a for a in actions if a not in merged[resource]]
    return [(resource, tuple(actions)) for resource, actions in merged.items()]


def _trusts_sagemaker(document: Any) -> bool:
    if isinstance(document, str):
        document = json.loads(urllib.parse.unquote(document))
    statements = document.get("Statement", [])
    for st in statements if isinstance(statements, list) else [statements]:
        if st.get("Effect") != "Allow":
            continue
        actions = st.get("Action", [])
        actions = [actions] if isinstance(actions, str) else actions
        if not any(a in ("sts:AssumeRole", "sts:*", "*") for a in actions):
            continue
        principal = st.get("Principal", {})
        services = principal.get("Service", []) if isinstance(principal, dict) else []
        services = [services] if isinstance(services, str) else services
        if SAGEMAKER_PRINCIPAL in services:
            return True
    return False


def _simulate(iam: Any, source_arn: str, actions: tuple[str, ...], resource: str,
              context: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    kwargs: dict[str, Any] = {"PolicySourceArn": source_arn, "ActionNames": list(actions), "ResourceArns": [resource]}
    if context:
        kwargs["ContextEntries"] = context
    pages = iam.get_paginator("simulate_principal_policy").paginate(**kwargs)
    return [result for page in pages for result in page.get("EvaluationResults", [])]


def _caller_arn(sts: Any) -> str | None:
    """The caller as an IAM principal ARN that simulation accepts (assumed roles become their role)."""
    arn = sts.get_caller_identity()["Arn"]
    parts = arn.split(":")
    if len(parts) < 6:
        return None
    account, resource = parts[4], parts[5]
    if resource.startswith("assumed-role/"):
        return f"arn:aws:iam::{account}:role/{resource.split('/')[1]}"
    if resource.startswith("user/"):
        return f"arn:aws:iam::{account}:{resource}"
    if resource.startswith("role/"):
        return f"arn:aws:iam::{account}:{resource}"
    return None


# Answers that are definite refusals of the caller, not of the check: these stop the command (exit 4).
CREDENTIAL_ERRORS = ("InvalidClientTokenId", "UnrecognizedClientException", "ExpiredToken", "ExpiredTokenException",
                     "SignatureDoesNotMatch", "InvalidAccessKeyId", "IncompleteSignature")


def _definite(exc: BaseException) -> bool:
    """True when `exc` says AWS refused these credentials or cannot be reached at all.

    Everything else (a 5xx, an answer that does not parse, an endpoint without the operation, a
    throttle that outlived the retries, AccessDenied, a call that timed out) leaves the role check
    unable to tell.
    """
    from botocore import exceptions as bx

    if _timed_out(exc):
        return False
    if isinstance(exc, bx.ClientError):
        return str(exc.response.get("Error", {}).get("Code", "")) in CREDENTIAL_ERRORS
    return isinstance(exc, (bx.NoCredentialsError, bx.PartialCredentialsError, bx.EndpointConnectionError))


def _timed_out(exc: BaseException) -> bool:
    """A call that got no answer in time: no answer at all, so never a definite one."""
    from botocore import exceptions as bx

    from launcher.core.aws import deadline_error

    return isinstance(exc, (bx.ConnectTimeoutError, bx.ReadTimeoutError, deadline_error()))


def check_role(plan: Plan, iam: Any, sts: Any) -> RoleCheck:
    """Read the role, its trust policy and simulate what the job needs; never writes.

    Raises botocore's exception only for a definite refusal (`_definite`); any other failure to read
    or simulate is a verdict of unknown, with the reason, so submit warns and goes on.
    """
    from botocore.exceptions import ClientError

    if not plan.role:
        raise UsageError("no IAM role: set `role:` in the spec or export SMP_LAUNCH_ROLE (a role name or ARN)")
    check = _Findings(role=plan.role)
    try:
        role = iam.get_role(RoleName=role_name(plan.role))["Role"]
    except Exception as exc:
        if _definite(exc):
            raise
        code = exc.response.get("Error", {}).get("Code", "") if isinstance(exc, ClientError) else ""
        if code == "NoSuchEntity":
            check.problems.append(f"role {role_name(plan.role)} does not exist in this account")
            return check.result(RoleVerdict.FAIL)
        check.unknowns.append(f"cannot read the role ({_why(exc)}); the job may still work")
        return check.result(RoleVerdict.UNKNOWN)
    try:
        _check_read_role(plan, role, check, iam, sts)
    except Exception as exc:
        if _definite(exc):
            raise
        check.unknowns.append(f"IAM's answer could not be used ({_why(exc)})")
        return check.result(RoleVerdict.UNKNOWN)
    return check.result()


def _check_read_role(plan: Plan, role: dict[str, Any], check: _Findings, iam: Any, sts: Any) -> None:
    check.role_arn = role["Arn"]
    if check.role.startswith("arn:") and check.role != role["Arn"]:
        check.problems.append(f"the spec names {check.role} but the role's ARN is {role['Arn']}")
    if not _trusts_sagemaker(role.get("AssumeRolePolicyDocument", {})):
        check.problems.append(f"the trust policy does not let {SAGEMAKER_PRINCIPAL} call sts:AssumeRole; "
                              "add it to the role's trust relationships")
    account = role["Arn"].split(":")[4]
    for resource, actions in required_permissions(plan, account):
        try:
            results = _simulate(iam, role["Arn"], actions, resource)
        except Exception as exc:
            if _definite(exc):
                raise
            check.unknowns.append(f"IAM did not simulate the role's permissions ({_why(exc)})")
            if _timed_out(exc):  # IAM is not answering: asking it again would only wait as long again
                check.unknowns.append("the caller's iam:PassRole was not simulated (IAM did not answer in time)")
                return
            break
        check.checked += len(actions)
        for r in results:
            if r.get("EvalDecision") != "allowed":
                check.missing.append({"action": r["EvalActionName"], "resource": r.get("EvalResourceName", resource),
                                      "decision": r.get("EvalDecision", "")})
    caller: str | None = None
    try:
        caller = _caller_arn(sts)
        if caller is None:
            check.unknowns.append("the caller is not an IAM user or role, so iam:PassRole cannot be simulated")
        else:
            context = [{"ContextKeyName": "iam:PassedToService", "ContextKeyValues": [SAGEMAKER_PRINCIPAL],
                        "ContextKeyType": "string"}]
            for r in _simulate(iam, caller, ("iam:PassRole",), role["Arn"], context):
                check.checked += 1
                if r.get("EvalDecision") != "allowed":
                    check.missing.append({"action": "iam:PassRole (caller)", "resource": role["Arn"],
                                          "decision": r.get("EvalDecision", "")})
    except Exception as exc:
        if _definite(exc):
            raise
        check.unknowns.append(f"cannot simulate the caller's iam:PassRole ({_why(exc)})")
    queue = getattr(getattr(plan.spec, "cluster", None), "queue", None)
    if queue:
        _check_queue_submit(plan, queue, account, check, iam, caller)


# What the caller needs to hand a job to an AWS Batch queue: SubmitServiceJob on the queue
# (https://docs.aws.amazon.com/batch/latest/APIReference/API_SubmitServiceJob.html); the role it passes in the
# payload is the iam:PassRole checked above.
QUEUE_ACTIONS = ("batch:SubmitServiceJob",)


def _check_queue_submit(plan: Plan, queue: str, account: str, check: _Findings, iam: Any,
                        caller: str | None) -> None:
    arn = queue if queue.startswith("arn:") else f"arn:aws:batch:{plan.region}:{account}:job-queue/{queue}"
    if caller is None:
        check.unknowns.append("the caller is not known as an IAM user or role, so batch:SubmitServiceJob cannot "
                              "be simulated")
        return
    try:
        for r in _simulate(iam, caller, QUEUE_ACTIONS, arn):
            check.checked += 1
            if r.get("EvalDecision") != "allowed":
                check.missing.append({"action": f"{r['EvalActionName']} (caller)", "resource": arn,
                                      "decision": r.get("EvalDecision", "")})
    except Exception as exc:
        if _definite(exc):
            raise
        check.unknowns.append(f"cannot simulate the caller's batch:SubmitServiceJob ({_why(exc)})")


def _why(exc: Exception) -> str:
    """A short reason: the error code AWS gave, else the exception's kind (never a raw response body)."""
    from launcher.core.sanitize import clean

    response = getattr(exc, "response", None)
    err = response.get("Error", {}) if isinstance(response, dict) else {}
    code = err.get("Code") if isinstance(err, dict) else None
    if code:
        return clean(code, 80)
    status = (response or {}).get("ResponseMetadata", {}).get("HTTPStatusCode") if isinstance(response, dict) else None
    return f"{type(exc).__name__}{f', HTTP {status}' if status else ''}"


# What a SageMaker Pipeline's execution role needs to run its TrainingSteps: create and describe the jobs
# (tagged, so AddTags too) and pass the jobs' role (here, itself) to SageMaker
# (https://docs.aws.amazon.com/sagemaker/latest/dg/build-and-manage-access.html).
PIPELINE_JOB_ACTIONS = ("sagemaker:CreateTrainingJob", "sagemaker:DescribeTrainingJob", "sagemaker:AddTags")


def check_pipeline_role(role_arn: str, region: str, iam: Any) -> RoleCheck:
    """Simulate what the pipeline's execution role does on top of the job's own needs (check_role);
    only reads IAM. A simulation IAM cannot answer is a verdict of unknown, as in check_role."""
    check = _Findings(role=role_arn, role_arn=role_arn)
    account = role_arn.split(":")[4] if role_arn.count(":") >= 5 else "*"
    context = [{"ContextKeyName": "iam:PassedToService", "ContextKeyValues": [SAGEMAKER_PRINCIPAL],
                "ContextKeyType": "string"}]
    wanted = ((f"arn:aws:sagemaker:{region}:{account}:training-job/*", PIPELINE_JOB_ACTIONS, None),
              (role_arn, ("iam:PassRole",), context))
    try:
        for resource, actions, ctx in wanted:
            for r in _simulate(iam, role_arn, actions, resource, ctx):
                check.checked += 1
                if r.get("EvalDecision") != "allowed":
                    check.missing.append({"action": f"{r['EvalActionName']} (pipeline)",
                                          "resource": r.get("EvalResourceName", resource),
                                          "decision": r.get("EvalDecision", "")})
    except Exception as exc:
        if _definite(exc):
            raise
        check.unknowns.append(f"IAM did not simulate the pipeline role's permissions ({_why(exc)})")
    return check.result()
