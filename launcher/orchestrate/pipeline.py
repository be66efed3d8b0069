"""SageMaker Pipelines: one TrainingStep per plan, in order, each depending on the one before.

A flow that must outlive a laptop (pretrain, then fine-tune) runs on AWS's own engine. The steps are
built by the SDK's workflow classes from the very Estimator submit builds (launcher.submission.estimator,
under a PipelineSession, where `fit` records the request instead of starting a job), so a step's
arguments are the plan's predicted CreateTrainingJob request less what a pipeline decides at run time
(tests/test_pipeline.py states each difference). Like submit, only `upsert_pipeline` writes: each
plan's source tarball (content-addressed, skipped when already there), then CreatePipeline or
UpdatePipeline.
"""
from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from launcher.core.aws import AwsError, Clients, explain, recording
from launcher.core.errors import LauncherError, UsageError
from launcher.core.sanitize import clean
from launcher.plan.build import Plan

# CreatePipeline's PipelineName: https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreatePipeline.html
PIPELINE_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,255}$")
STEP_NAME = re.compile(r"[^A-Za-z0-9-]")


@dataclass(frozen=True)
class PipelineResult:
    """What `pipeline` built (and, unless dry_run, upserted); `to_dict()` is `pipeline --output json`."""

    name: str
    region: str
    role_arn: str
    steps: tuple[str, ...]
    definition: dict[str, Any]
    dry_run: bool
    arn: str | None = None
    uploaded: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    aws_calls: tuple[str, ...] = field(default=())
    role_checks: tuple[Any, ...] = ()  # launcher.submission.role.RoleCheck: each job's, then the pipeline role's

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "region": self.region, "role_arn": self.role_arn, "steps": list(self.steps),
                "dry_run": self.dry_run, "arn": self.arn, "uploaded": list(self.uploaded),
                "warnings": list(self.warnings), "aws_calls": list(self.aws_calls),
                "role_checks": [c.as_dict() for c in self.role_checks], "definition": self.definition}


def step_names(plans: Sequence[Plan]) -> list[str]:
    """One name per step, never two alike (the SDK refuses that): the spec's name (a repeated one gets its
    position, or the next number free), in the order given."""
    names: list[str] = []
    for i, plan in enumerate(plans, 1):
        base = STEP_NAME.sub("-", plan.base_job_name)[:58] or "train"
        name, n = base, i
        while name in names:
            name, n = f"{base}-{n}", n + 1
        names.append(name)
    return names


def _check(name: str, plans: Sequence[Plan]) -> str:
    if not plans:
        raise UsageError("a pipeline needs at least one spec")
    if not PIPELINE_NAME.match(name):
        raise UsageError(f"pipeline name {name!r} is not allowed: letters, digits and single hyphens, "
                         "at most 256 characters, starting with a letter or digit")
    regions = {p.region for p in plans}
    if len(regions) != 1 or None in regions:
        raise UsageError("every spec of a pipeline must run in one region (got "
                         f"{', '.join(sorted(str(r) for r in regions))}); build every plan for one region")
    return str(next(iter(regions)))


def build_pipeline(plans: Sequence[Plan], name: str, role_arn: str, clients: Clients) -> Any:
    """The SDK's Pipeline object (sagemaker.workflow.pipeline.Pipeline): no AWS call, nothing written.

    Each step's Estimator is the one submit would build (the same arguments); the steps run in order."""
    from launcher.submission import estimator as backend

    _check(name, plans)
    backend.import_sdk()
    from sagemaker.workflow.pipeline import Pipeline
    from sagemaker.workflow.steps import TrainingStep

    session = backend.session(clients.session, clients.sagemaker, pipeline=True)
    fit = backend.untracked_fit()
    steps: list[Any] = []
    with backend.sdk_silent(), _quiet_pipeline_warning():
        for plan, step_name in zip(plans, step_names(plans), strict=True):
            est = backend.build(_per_execution(plan), plan.source.uri, role_arn, clients.session,
                                clients.sagemaker, sdk_session=session)
            args = fit(est, inputs=backend.channels(plan) or None, job_name=plan.job_name, wait=False, logs=False)
            steps.append(TrainingStep(name=step_name, step_args=args, depends_on=steps[-1:] or None))
        return Pipeline(name=name, steps=steps, sagemaker_session=session)


def _per_execution(plan: Plan) -> Plan:
    """The plan as a pipeline step runs it: checkpoints under the execution's id, not the plan's job name.

    A plan names its default checkpoint folder after its job; every execution of a pipeline would
    share that folder and resume from the last execution's checkpoints (the entry script resumes
    from whatever it finds). A checkpoint_path the spec sets itself is kept as it is."""
    import dataclasses

    from sagemaker.workflow.execution_variables import ExecutionVariables
    from sagemaker.workflow.functions import Join

    if plan.spec.output.checkpoint_path:
        return plan
    base = f"{plan.spec.output.path.rstrip('/')}/checkpoints/{plan.base_job_name}"
    # A pipeline variable where the Estimator takes a str: the SDK accepts either, and renders it per execution.
    uri = cast(str, Join(on="/", values=[base, ExecutionVariables.PIPELINE_EXECUTION_ID]))
    return dataclasses.replace(plan, estimator=dataclasses.replace(plan.estimator, checkpoint_s3_uri=uri))


@contextlib.contextmanager
def _quiet_pipeline_warning() -> Iterator[None]:
    """The SDK warns (UserWarning) on every fit under a PipelineSession that no job is started: that is the point."""
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Running within a PipelineSession")
        yield


def definition(pipeline: Any) -> dict[str, Any]:
    """The pipeline's definition as the service receives it (parsed JSON)."""
    from launcher.submission.estimator import sdk_silent

    try:
        with sdk_silent():
            return json.loads(pipeline.definition())
    except ValueError as exc:  # the SDK's own checks of the steps (their names, their order)
        raise UsageError(f"the SageMaker SDK refused the pipeline: {clean(exc, 300)}") from None


def untracked_create(pipeline: Any) -> Callable[..., Any]:
    """`Pipeline.create` for this pipeline, without the SDK's telemetry (as submit's fit)."""
    from sagemaker.workflow.pipeline import Pipeline

    from launcher.submission.estimator import untracked

    inner = untracked(Pipeline, "create")
    return lambda *args, **kwargs: inner(pipeline, *args, **kwargs)


def pipeline_tags(plans: Sequence[Plan]) -> list[dict[str, str]]:
    """The pipeline's own tags: the first plan's (its managed and version tags), less the per-spec hash."""
    from launcher.core.names import GIT_COMMIT_TAG, SPEC_HASH_TAG

    return [dict(t) for t in plans[0].estimator.tags if t["Key"] not in (SPEC_HASH_TAG, GIT_COMMIT_TAG)]


def pipeline_definition(plans: Sequence[Plan], name: str, *, role_arn: str | None = None,
                        clients: Clients | None = None) -> dict[str, Any]:
    """The definition `pipeline --dry-run` prints: pure, no AWS call (a role name stays a placeholder)."""
    region = _check(name, plans)
    clients = clients or Clients(region=region)
    return definition(build_pipeline(plans, name, role_arn or plans[0].role_arn_placeholder, clients))


def upsert_pipeline(plans: Sequence[Plan], name: str, *, role: str | None = None, dry_run: bool = False,
                    skip_role_check: bool = False, clients: Clients | None = None) -> PipelineResult:
    """Check each plan as submit does (advisor errors, buckets, the role), then, unless dry_run, upload each
    source tarball that is not there yet and create or update the pipeline (the SDK's Pipeline.upsert).

    `role` (a name or ARN) is the role the pipeline runs under and the jobs get; default: the first
    spec's. Every job of the pipeline gets that role, so it is checked against every plan."""
    region = _check(name, plans)
    clients = clients or Clients(region=region)
    with recording(clients) as calls:
        return _upsert_checked(plans, name, region, role, dry_run, skip_role_check, clients, calls)


def _upsert_checked(plans: Sequence[Plan], name: str, region: str, role: str | None, dry_run: bool,
                    skip_role_check: bool, clients: Clients, calls: list[str]) -> PipelineResult:
    import dataclasses

    from launcher.render.source import upload
    from launcher.submission.create import check_account

    role = role or plans[0].role
    if role:  # one role for the pipeline and every step (checked against each plan below)
        plans = [dataclasses.replace(p, role=role, estimator=dataclasses.replace(p.estimator, role=role))
                 for p in plans]
    warnings: list[str] = []
    role_arn = ""
    checks = []
    for plan in plans:
        account = check_account(plan, clients, skip_role_check=skip_role_check)
        warnings += [w for w in account.warnings if w not in warnings]
        role_arn = account.role_arn
        checks.append(account.role_check)
    if not skip_role_check:
        checks.append(_check_pipeline_role(role_arn, region, clients, warnings))
    pipeline = build_pipeline(plans, name, role_arn, clients)
    body = definition(pipeline)
    arn = None
    uploaded: list[str] = []
    if not dry_run:
        for plan in plans:
            try:
                if upload(clients.s3, plan.source.uri, plan.source.tarball, plan.estimator.output_kms_key):
                    uploaded.append(plan.source.uri)
            except Exception as exc:
                raise explain(exc, "uploading a source tarball") from None
        arn = _upsert(pipeline, role_arn, pipeline_tags(plans))
    return PipelineResult(name=name, region=region, role_arn=role_arn, steps=tuple(step_names(plans)),
                          definition=body, dry_run=dry_run, arn=arn, uploaded=tuple(uploaded),
                          warnings=tuple(warnings), aws_calls=tuple(calls),
                          role_checks=tuple(c for c in checks if c is not None))


def _check_pipeline_role(role_arn: str, region: str, clients: Clients, warnings: list[str]) -> Any:
    """The pipeline role must also start, describe and tag the jobs, and pass itself to them."""
    from launcher.submission.role import RoleRefused, RoleVerdict, check_pipeline_role

    try:
        check = check_pipeline_role(role_arn, region, clients.iam)
    except Exception as exc:
        raise explain(exc, "checking the pipeline role") from None
    if check.verdict == RoleVerdict.FAIL:
        raise RoleRefused("\n".join(check.lines()))
    if check.verdict == RoleVerdict.UNKNOWN:
        warnings += [f"pipeline role check: cannot tell: {u}" for u in check.unknowns]
    return check


def _upsert(pipeline: Any, role_arn: str, tags: list[dict[str, str]]) -> str:
    """Pipeline.upsert (create; update when it exists), its create untracked; returns the pipeline's ARN."""
    from launcher.submission.estimator import sdk_silent

    pipeline.create = untracked_create(pipeline)  # the instance's, so upsert calls it
    try:
        with sdk_silent():
            response = pipeline.upsert(role_arn=role_arn, description="smp-launch pipeline", tags=tags)
    except LauncherError:
        raise
    except Exception as exc:
        if type(exc).__module__.startswith("botocore"):
            raise _pipeline_error(exc) from None
        raise LauncherError(f"the SageMaker SDK refused the pipeline: {exc}") from None
    return str(response.get("PipelineArn", ""))


def _pipeline_error(exc: Exception) -> LauncherError:
    """A sentence for the failed upsert; an endpoint without the Pipelines API (a plain emulator) says so."""
    from botocore.exceptions import ClientError
    from botocore.parsers import ResponseParserError

    if isinstance(exc, ResponseParserError):  # an HTML error page, as a server lacking the operation sends
        return AwsError("cannot tell whether the pipeline was created or updated: the SageMaker endpoint's "
                        "answer to CreatePipeline/UpdatePipeline could not be read")
    if isinstance(exc, ClientError):
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        code = str(exc.response.get("Error", {}).get("Code", ""))
        if status == 501 or code in ("NotImplemented", "InternalFailure", "500", "501"):
            return AwsError("cannot tell whether the pipeline was created: this SageMaker endpoint does not "
                            "answer CreatePipeline/UpdatePipeline")
    return explain(exc, "upserting the pipeline")
