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
import dataclasses
import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from launcher.core.aws import AwsError, Clients, explain, recording
from launcher.core.errors import LauncherError, UsageError
from launcher.core.sanitize import DETAIL_LIMIT, clean
from launcher.orchestrate.pipeline_params import (
    MAX_STEPS_ENV,
    StepParameter,
    channel_field,
    check_values,
    pipeline_parameters,
)
from launcher.orchestrate.retry import RetryPolicy
from launcher.plan.build import Plan
from launcher.spec.models import FROM_STEP_CHANNEL

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
    parameters: tuple[StepParameter, ...] = ()
    execution_arn: str | None = None  # the execution started (`start`), if any
    values: Mapping[str, str | int] = field(default_factory=dict)  # the parameter values it was started with
    notifications: tuple[str, ...] = ()  # the EventBridge rules that announce its executions (`notify`)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "region": self.region, "role_arn": self.role_arn, "steps": list(self.steps),
                "dry_run": self.dry_run, "arn": self.arn, "uploaded": list(self.uploaded),
                "warnings": list(self.warnings), "aws_calls": list(self.aws_calls),
                "role_checks": [c.as_dict() for c in self.role_checks],
                "parameters": [p.to_dict() for p in self.parameters], "execution_arn": self.execution_arn,
                "values": dict(self.values), "notifications": list(self.notifications),
                "definition": self.definition}


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


def build_pipeline(plans: Sequence[Plan], name: str, role_arn: str, clients: Clients,
                   retry: RetryPolicy | None = None) -> Any:
    """The SDK's Pipeline object (sagemaker.workflow.pipeline.Pipeline): no AWS call, nothing written.

    Each step's Estimator is the one submit would build (the same arguments), with what a team changes
    between executions as pipeline parameters (launcher.orchestrate.pipeline_params), SageMaker's own retry
    policies for the retried failure classes, caching where the spec asks, and, for a step whose spec says
    `model.from_step`, that step's exported model as its `from_step` channel. The steps run in order."""
    from launcher.submission import estimator as backend

    _check(name, plans)
    names = step_names(plans)
    _check_from_steps(plans, names)
    backend.import_sdk()
    from sagemaker.inputs import TrainingInput
    from sagemaker.workflow.pipeline import Pipeline
    from sagemaker.workflow.steps import CacheConfig, TrainingStep

    session = backend.session(clients.session, clients.sagemaker, pipeline=True)
    fit = backend.untracked_fit()
    params = pipeline_parameters(plans, names)
    variables = {p.name: _sdk_parameter(p) for p in params}
    steps: dict[str, Any] = {}
    with backend.sdk_silent(), _quiet_pipeline_warning():
        for plan, step_name in zip(plans, names, strict=True):
            mine = {p.field: variables[p.name] for p in params if p.step == step_name}
            # With OutputPath a parameter, the SDK asks the session's default bucket where a plain job's output
            # bucket decides (whether the code's KMS key applies), and would create sagemaker-REGION-ACCOUNT to
            # answer. The spec's output bucket is the answer a plain job gets, with no AWS call.
            session._default_bucket = plan.spec.output.path[len("s3://"):].split("/", 1)[0]
            est = backend.build(_per_execution(plan, mine), plan.source.uri, role_arn, clients.session,
                                clients.sagemaker, sdk_session=session)
            est.instance_type = mine["cluster.instance_type"]
            est.instance_count = mine["cluster.instance_count"]
            est.output_path = mine["output.path"]
            est.environment = {**(est.environment or {}), MAX_STEPS_ENV: _as_text(mine["training.max_steps"])}
            inputs: dict[str, Any] = {channel: mine.get(channel_field(channel), uri)
                                      for channel, uri in backend.channels(plan).items()}
            source = plan.spec.model.from_step
            if source:
                inputs[FROM_STEP_CHANNEL] = TrainingInput(
                    s3_data=steps[source].properties.ModelArtifacts.S3ModelArtifacts)
            args = fit(est, inputs=inputs or None, job_name=plan.job_name, wait=False, logs=False)
            previous = list(steps.values())[-1:]
            cache = (CacheConfig(enable_caching=True, expire_after=iso_duration(plan.spec.pipeline.cache_expire_after))
                     if plan.spec.pipeline.cache else None)
            steps[step_name] = TrainingStep(name=step_name, step_args=args, depends_on=previous or None,
                                            retry_policies=retry_policies(retry), cache_config=cache)
        return Pipeline(name=name, parameters=list(variables.values()), steps=list(steps.values()),
                        sagemaker_session=session)


def _check_from_steps(plans: Sequence[Plan], names: Sequence[str]) -> None:
    """`model.from_step` names an EARLIER step of this pipeline, one that exports its model."""
    for i, plan in enumerate(plans):
        source = plan.spec.model.from_step
        if not source:
            continue
        earlier = dict(zip(names[:i], plans[:i], strict=True))
        if source not in earlier:
            hint = f"; the steps before it are {', '.join(names[:i])}" if i else "; it is the first step"
            raise UsageError(f"{plan.spec_file}: model.from_step: {source!r} is not an earlier step of this "
                             f"pipeline{hint}")
        if earlier[source].spec.output.final_export != "full":
            raise UsageError(f"{plan.spec_file}: model.from_step: step {source} exports no model a fine-tune can "
                             f"load: set output.save_final_model: full in {earlier[source].spec_file} (a Hugging "
                             "Face model the next step's from_pretrained reads)")


def _sdk_parameter(param: StepParameter) -> Any:
    from sagemaker.workflow.parameters import ParameterInteger, ParameterString

    if param.kind == "Integer":
        return ParameterInteger(name=param.name, default_value=int(param.default))
    choices: Any = list(param.choices) or None  # the SDK's annotation says list, its default is None
    return ParameterString(name=param.name, default_value=str(param.default), enum_values=choices)


def _as_text(variable: Any) -> Any:
    """An Integer parameter where the request needs a string (an environment value)."""
    from sagemaker.workflow.functions import Join

    return Join(on="", values=[variable])


def iso_duration(seconds: int) -> str:
    """Seconds as the ISO 8601 duration CacheConfig's ExpireAfter takes (P30D, PT16M, P1DT5H)."""
    days, rest = divmod(int(seconds), 86400)
    hours, rest = divmod(rest, 3600)
    minutes = -(-rest // 60)
    time = (f"{hours}H" if hours else "") + (f"{minutes}M" if minutes else "")
    return f"P{days}D" + (f"T{time}" if time else "") if days else f"PT{time or '1M'}"


# SageMaker's exception types a training step's retry policy can name
# (https://docs.aws.amazon.com/sagemaker/latest/dg/pipelines-retry-policy.html), by the failure class that
# names the same condition.
JOB_EXCEPTIONS = {"capacity": "CAPACITY_ERROR", "internal_error": "INTERNAL_ERROR", "quota": "RESOURCE_LIMIT"}


def retry_policies(retry: RetryPolicy | None) -> list[Any]:
    """SageMaker's retry policies for a step: the job's own failures in a retried class that a pipeline can name
    (capacity, internal_error, quota), and always the step's throttled or faulted service calls."""
    from sagemaker.workflow.retry import (
        SageMakerJobExceptionTypeEnum,
        SageMakerJobStepRetryPolicy,
        StepExceptionTypeEnum,
        StepRetryPolicy,
    )

    policy = retry or RetryPolicy()
    out: list[Any] = [StepRetryPolicy(exception_types=[StepExceptionTypeEnum.SERVICE_FAULT,
                                                       StepExceptionTypeEnum.THROTTLING],
                                      interval_seconds=int(max(1, policy.backoff)), backoff_rate=policy.factor,
                                      max_attempts=max(1, policy.max_attempts - 1))]
    kinds = [getattr(SageMakerJobExceptionTypeEnum, JOB_EXCEPTIONS[c]) for c in sorted(policy.classes)
             if c in JOB_EXCEPTIONS]
    if kinds and policy.max_attempts > 1:
        out.append(SageMakerJobStepRetryPolicy(exception_types=kinds, interval_seconds=int(max(1, policy.backoff)),
                                               backoff_rate=policy.factor, max_attempts=policy.max_attempts - 1))
    return out


def unretried_classes(retry: RetryPolicy | None) -> list[str]:
    """The retried classes a pipeline cannot retry (no SageMaker exception type names them)."""
    policy = retry or RetryPolicy()
    return [*sorted(str(c) for c in policy.classes if c not in JOB_EXCEPTIONS),
            *(f"exit:{code}" for code in sorted(policy.exit_codes))]


def _per_execution(plan: Plan, values: dict[str, Any]) -> Plan:
    """The plan as a pipeline step runs it: checkpoints under the execution's OutputPath and id, not the plan's
    job name.

    A plan names its default checkpoint folder after its job; every execution of a pipeline would share that
    folder and resume from the last execution's checkpoints (the entry script resumes from whatever it finds).
    A cached step cannot use the execution's id: CheckpointConfig is part of a training step's cache key
    (https://docs.aws.amazon.com/sagemaker/latest/dg/pipelines-default-keys.html), so an id-named folder never
    hits the cache. Its folder is named after the spec's hash and the instance type and count instead, the
    same for every execution that runs the same step (which may then resume from an earlier one: the same
    job). A checkpoint_path the spec sets itself is kept as it is."""

    from sagemaker.workflow.execution_variables import ExecutionVariables
    from sagemaker.workflow.functions import Join

    if plan.spec.output.checkpoint_path:
        return plan
    base = [values["output.path"], "checkpoints", plan.base_job_name]
    if plan.spec.pipeline.cache:
        key = Join(on="-", values=[plan.spec_hash[:16], values["cluster.instance_type"],
                                   values["cluster.instance_count"]])
        uri = Join(on="/", values=[*base, key])
    else:
        uri = Join(on="/", values=[*base, ExecutionVariables.PIPELINE_EXECUTION_ID])
    # A pipeline variable where the Estimator takes a str: the SDK accepts either, and renders it per execution.
    return dataclasses.replace(plan, estimator=dataclasses.replace(plan.estimator,
                                                                   checkpoint_s3_uri=cast(str, uri)))


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
        raise UsageError(f"the SageMaker SDK refused the pipeline: {clean(exc, DETAIL_LIMIT)}") from None


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
                        clients: Clients | None = None, retry: RetryPolicy | None = None) -> dict[str, Any]:
    """The definition `pipeline --dry-run` prints: pure, no AWS call (a role name stays a placeholder)."""
    region = _check(name, plans)
    clients = clients or Clients(region=region)
    return definition(build_pipeline(plans, name, role_arn or plans[0].role_arn_placeholder, clients, retry))


def upsert_pipeline(plans: Sequence[Plan], name: str, *, role: str | None = None, dry_run: bool = False,
                    skip_role_check: bool = False, clients: Clients | None = None, retry: RetryPolicy | None = None,
                    start: bool = False, parameters: Mapping[str, str] | None = None,
                    notify: str | None = None) -> PipelineResult:
    """Check each plan as submit does (advisor errors, buckets, the role), then, unless dry_run, upload each
    source tarball that is not there yet and create or update the pipeline (the SDK's Pipeline.upsert); with
    `start`, start an execution with `parameters` (name -> value, each checked against its step's plan
    before anything is written).

    `role` (a name or ARN) is the role the pipeline runs under and the jobs get; default: the first
    spec's. Every job of the pipeline gets that role, so it is checked against every plan. `retry` decides
    the steps' retry policies (default: RetryPolicy()). `notify` (an SNS topic ARN; default: the first spec's
    `notify.sns`) gets every execution's end through an EventBridge rule (launcher.orchestrate.notify)."""
    region = _check(name, plans)
    values = check_values(plans, step_names(plans), parameters or {})
    if values and not start:
        raise UsageError("parameter values are for an execution: give them with start")
    clients = clients or Clients(region=region)
    with recording(clients) as calls:
        result = _upsert_checked(plans, name, region, role, dry_run, skip_role_check, clients, calls, retry,
                                 values if start else None)
        topic = notify or (plans[0].spec.notify.sns if plans[0].spec.notify else None)
        if topic:
            result = _announce(result, clients, topic)
        return dataclasses.replace(result, aws_calls=tuple(calls))


def _announce(result: PipelineResult, clients: Clients, topic: str) -> PipelineResult:
    """The rule that announces the pipeline's executions (with dry_run: which it would be)."""
    from launcher.orchestrate.notify import check_topic, pipeline_rules, put_rules

    arn = result.arn or f"arn:aws:sagemaker:{result.region}:<account>:pipeline/{result.name.lower()}"
    rules = pipeline_rules(result.name, arn)
    if result.dry_run:
        return dataclasses.replace(result, notifications=tuple(r.name for r in rules))
    warnings = [*result.warnings, *check_topic(clients, topic)]
    put_rules(clients, rules, topic)
    return dataclasses.replace(result, warnings=tuple(warnings), notifications=tuple(r.name for r in rules))


def _upsert_checked(plans: Sequence[Plan], name: str, region: str, role: str | None, dry_run: bool,
                    skip_role_check: bool, clients: Clients, calls: list[str], retry: RetryPolicy | None,
                    values: dict[str, str | int] | None) -> PipelineResult:

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
    unretried = unretried_classes(retry)
    if unretried:
        warnings.append(f"a pipeline step cannot retry {', '.join(unretried)}: SageMaker's retry policies name only "
                        "capacity, internal errors and resource limits, not exit codes (submit --retry can)")
    pipeline = build_pipeline(plans, name, role_arn, clients, retry)
    body = definition(pipeline)
    arn = execution = None
    uploaded: list[str] = []
    if not dry_run:
        for plan in plans:
            try:
                if upload(clients.s3, plan.source.uri, plan.source.tarball, plan.estimator.output_kms_key):
                    uploaded.append(plan.source.uri)
            except Exception as exc:
                raise explain(exc, "uploading a source tarball") from None
        arn = _upsert(pipeline, role_arn, pipeline_tags(plans))
        if values is not None:
            execution = start_execution(clients, name, values)
    return PipelineResult(name=name, region=region, role_arn=role_arn, steps=tuple(step_names(plans)),
                          definition=body, dry_run=dry_run, arn=arn, uploaded=tuple(uploaded),
                          warnings=tuple(warnings), aws_calls=tuple(calls),
                          role_checks=tuple(c for c in checks if c is not None),
                          parameters=pipeline_parameters(plans, step_names(plans)), execution_arn=execution,
                          values=dict(values or {}))


def start_execution(clients: Clients, name: str, values: Mapping[str, str | int]) -> str:
    """StartPipelineExecution with the (checked) parameter values; returns the execution's ARN."""
    request: dict[str, Any] = {"PipelineName": name, "PipelineExecutionDescription": "started by smp-launch"}
    if values:
        request["PipelineParameters"] = [{"Name": k, "Value": str(v)} for k, v in values.items()]
    try:
        response = clients.sagemaker.start_pipeline_execution(**request)
    except Exception as exc:
        raise explain(exc, f"starting an execution of pipeline {name}") from None
    return str(response["PipelineExecutionArn"])


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
