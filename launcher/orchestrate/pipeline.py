"""SageMaker Pipelines: one TrainingStep per plan, in order, each depending on the one before.

A flow that must outlive a laptop (pretrain, then fine-tune) runs on AWS's own engine. The steps are
built by the SDK's workflow classes from the very object submit builds, under a PipelineSession, where
it records the request instead of starting a job, so a step's arguments are the plan's predicted
CreateTrainingJob request less what a pipeline decides at run time (tests/test_pipeline.py states each
difference). One backend builds every step, on the SDK line installed:

- the PyTorch Estimator on SDK 2.x, in `sagemaker.workflow` (launcher.orchestrate.pipeline_v2);
- ModelTrainer on SDK 3.x, in the MLOps package's `sagemaker.mlops.workflow` (launcher.orchestrate.pipeline_v3).

SDK 2.x's ModelTrainer has no pipeline path (its `train` does not run under a PipelineSession), and one
pipeline's steps are never built by two backends: both are refused before anything is read or written.
Like submit, only `upsert_pipeline` writes: each plan's source tarball (content-addressed, skipped when
already there), on SDK 3.x each step's ModelTrainer drivers (likewise), then CreatePipeline or
UpdatePipeline.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from launcher.core.aws import AwsError, Clients, explain, recording
from launcher.core.errors import LauncherError, UsageError
from launcher.core.sanitize import DETAIL_LIMIT, clean
from launcher.core.sdk import BackendKind, installed_sdk
from launcher.orchestrate.pipeline_params import (
    StepParameter,
    check_values,
    pipeline_parameters,
)
from launcher.orchestrate.retry import RetryPolicy
from launcher.plan.build import Plan
from launcher.submission.sdk import no_sdk_defaults, sdk_silent

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


class Workflow(Protocol):
    """One SDK line's workflow classes, and how it turns a plan into a training step's arguments
    (launcher.orchestrate.pipeline_v2 and pipeline_v3 each have one)."""

    Pipeline: Any
    TrainingStep: Any
    CacheConfig: Any
    ParameterInteger: Any
    ParameterString: Any
    Join: Any
    ExecutionVariables: Any
    StepRetryPolicy: Any
    SageMakerJobStepRetryPolicy: Any
    StepExceptionTypeEnum: Any
    SageMakerJobExceptionTypeEnum: Any
    session: Any  # the session the Pipeline object is built with

    def step_arguments(self, plan: Plan, source_uri: str, mine: Mapping[str, Any], model: Any) -> Any: ...

    def untracked_create(self, pipeline: Any) -> Any: ...

    def upload(self, s3: Any) -> list[str]: ...

    def verify(self, s3: Any) -> dict[str, tuple[str, str]]: ...


@dataclass(frozen=True)
class Built:
    """The SDK's Pipeline object, and the workflow (SDK line) that built it."""

    pipeline: Any
    workflow: Workflow


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
    backend_of(plans)
    return str(next(iter(regions)))


def backend_of(plans: Sequence[Plan]) -> BackendKind:
    """The one backend that builds every step, where the installed SDK line has a pipeline path for it; otherwise a
    UsageError (exit 2) saying what to change, before anything is read or written. No SDK import."""
    for plan in plans:
        if plan.backend.problem:
            raise UsageError(f"{plan.spec_file}: cluster.backend: {plan.backend.problem}")
    first = plans[0]
    for plan in plans[1:]:
        if plan.backend.kind is not first.backend.kind:
            raise UsageError(f"{plan.spec_file}: cluster.backend: {plan.backend.kind} here but {first.backend.kind} in "
                             f"{first.spec_file}: one backend builds every step of a pipeline; set the same "
                             "cluster.backend in every spec")
    sdk = installed_sdk()
    if first.backend.kind is BackendKind.MODEL_TRAINER and (sdk.major or 0) < 3:
        raise UsageError(f"{first.spec_file}: cluster.backend: model-trainer cannot build a pipeline step on "
                         f"{sdk.describe()} (its ModelTrainer.train does not run under a PipelineSession): set "
                         "cluster.backend: estimator, or install SageMaker SDK 3.x ('sagemaker>=3')")
    return first.backend.kind


def workflow(plans: Sequence[Plan], clients: Clients, role_arn: str,
             drivers: Mapping[str, str] | None = None) -> Workflow:
    """The SDK line's workflow for the plans' backend (checked by `backend_of`); `drivers` moves ModelTrainer drivers
    from their content-addressed folder to another (launcher.orchestrate.pipeline_v3)."""
    if backend_of(plans) is BackendKind.MODEL_TRAINER:
        from launcher.orchestrate import pipeline_v3

        return pipeline_v3.Workflow(clients, role_arn, drivers)
    from launcher.orchestrate import pipeline_v2

    return pipeline_v2.Workflow(clients, role_arn)


def build_pipeline(plans: Sequence[Plan], name: str, role_arn: str, clients: Clients,
                   retry: RetryPolicy | None = None, drivers: Mapping[str, str] | None = None) -> Built:
    """The SDK's Pipeline object and the workflow that built it: no AWS call, nothing written. `drivers` (a
    ModelTrainer drivers folder -> the folder they go to instead) is what the workflow's `verify` found.

    Each step's arguments come from the object submit would build for its plan (the same arguments), with what a
    team changes between executions as pipeline parameters (launcher.orchestrate.pipeline_params), SageMaker's own
    retry policies for the retried failure classes, caching where the spec asks, and, for a step whose spec says
    `model.from_step`, that step's exported model as its `from_step` channel. The steps run in order."""
    _check(name, plans)
    names = step_names(plans)
    _check_from_steps(plans, names)
    wf = workflow(plans, clients, role_arn, drivers)
    params = pipeline_parameters(plans, names)
    variables = {p.name: _sdk_parameter(wf, p) for p in params}
    steps: dict[str, Any] = {}
    with sdk_silent(), _quiet_pipeline_warning():
        for plan, step_name in zip(plans, names, strict=True):
            mine = {p.field: variables[p.name] for p in params if p.step == step_name}
            source = plan.spec.model.from_step
            model = steps[source].properties.ModelArtifacts.S3ModelArtifacts if source else None
            args = wf.step_arguments(_per_execution(wf, plan, mine), plan.source.uri, mine, model)
            previous = list(steps.values())[-1:]
            expire = iso_duration(plan.spec.pipeline.cache_expire_after)
            cache = wf.CacheConfig(enable_caching=True, expire_after=expire) if plan.spec.pipeline.cache else None
            steps[step_name] = wf.TrainingStep(name=step_name, step_args=args, depends_on=previous or None,
                                               retry_policies=retry_policies(wf, retry), cache_config=cache)
        pipeline = wf.Pipeline(name=name, parameters=list(variables.values()), steps=list(steps.values()),
                               sagemaker_session=wf.session)
    return Built(pipeline, wf)


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


def _sdk_parameter(wf: Workflow, param: StepParameter) -> Any:
    if param.kind == "Integer":
        return wf.ParameterInteger(name=param.name, default_value=int(param.default))
    choices: Any = list(param.choices) or None  # the SDK's annotation says list, its default is None
    return wf.ParameterString(name=param.name, default_value=str(param.default), enum_values=choices)


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


def retry_policies(wf: Workflow, retry: RetryPolicy | None) -> list[Any]:
    """SageMaker's retry policies for a step: the job's own failures in a retried class that a pipeline can name
    (capacity, internal_error, quota), and always the step's throttled or faulted service calls."""
    policy = retry or RetryPolicy()
    step = wf.StepExceptionTypeEnum
    out: list[Any] = [wf.StepRetryPolicy(exception_types=[step.SERVICE_FAULT, step.THROTTLING],
                                         interval_seconds=int(max(1, policy.backoff)), backoff_rate=policy.factor,
                                         max_attempts=max(1, policy.max_attempts - 1))]
    kinds = [getattr(wf.SageMakerJobExceptionTypeEnum, JOB_EXCEPTIONS[c]) for c in sorted(policy.classes)
             if c in JOB_EXCEPTIONS]
    if kinds and policy.max_attempts > 1:
        out.append(wf.SageMakerJobStepRetryPolicy(exception_types=kinds, interval_seconds=int(max(1, policy.backoff)),
                                                  backoff_rate=policy.factor, max_attempts=policy.max_attempts - 1))
    return out


def unretried_classes(retry: RetryPolicy | None) -> list[str]:
    """The retried classes a pipeline cannot retry (no SageMaker exception type names them)."""
    policy = retry or RetryPolicy()
    return [*sorted(str(c) for c in policy.classes if c not in JOB_EXCEPTIONS),
            *(f"exit:{code}" for code in sorted(policy.exit_codes))]


def _per_execution(wf: Workflow, plan: Plan, values: Mapping[str, Any]) -> Plan:
    """The plan as a pipeline step runs it: checkpoints under the execution's OutputPath and id, not the plan's
    job name.

    A plan names its default checkpoint folder after its job; every execution of a pipeline would share that
    folder and resume from the last execution's checkpoints (the entry script resumes from whatever it finds).
    A cached step cannot use the execution's id: CheckpointConfig is part of a training step's cache key
    (https://docs.aws.amazon.com/sagemaker/latest/dg/pipelines-default-keys.html), so an id-named folder never
    hits the cache. Its folder is named after the spec's hash and the instance type and count instead, the
    same for every execution that runs the same step (which may then resume from an earlier one: the same
    job). A checkpoint_path the spec sets itself is kept as it is."""
    if plan.spec.output.checkpoint_path:
        return plan
    base = [values["output.path"], "checkpoints", plan.base_job_name]
    if plan.spec.pipeline.cache:
        key = wf.Join(on="-", values=[plan.spec_hash[:16], values["cluster.instance_type"],
                                      values["cluster.instance_count"]])
        uri = wf.Join(on="/", values=[*base, key])
    else:
        uri = wf.Join(on="/", values=[*base, wf.ExecutionVariables.PIPELINE_EXECUTION_ID])
    # A pipeline variable where the plan holds a str: both SDK lines accept either, and render it per execution.
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
    """The pipeline's definition as the service receives it (parsed JSON). On SDK 3.x building it runs each step's
    ModelTrainer again (its drivers stay in memory: launcher.orchestrate.pipeline_v3)."""
    try:
        with sdk_silent(), no_sdk_defaults(), _quiet_pipeline_warning():
            return json.loads(pipeline.definition())
    except ValueError as exc:  # the SDK's own checks of the steps (their names, their order)
        raise UsageError(f"the SageMaker SDK refused the pipeline: {clean(exc, DETAIL_LIMIT)}") from None


def pipeline_tags(plans: Sequence[Plan]) -> list[dict[str, str]]:
    """The pipeline's own tags: the first plan's (its managed and version tags), less the per-spec hash."""
    from launcher.core.names import GIT_COMMIT_TAG, SPEC_HASH_TAG

    return [dict(t) for t in plans[0].estimator.tags if t["Key"] not in (SPEC_HASH_TAG, GIT_COMMIT_TAG)]


def pipeline_definition(plans: Sequence[Plan], name: str, *, role_arn: str | None = None,
                        clients: Clients | None = None, retry: RetryPolicy | None = None) -> dict[str, Any]:
    """The definition `pipeline --dry-run` prints: pure, no AWS call (a role name stays a placeholder)."""
    region = _check(name, plans)
    clients = clients or Clients(region=region)
    return definition(build_pipeline(plans, name, role_arn or plans[0].role_arn_placeholder, clients,
                                     retry).pipeline)


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

    from launcher.submission import source_store
    from launcher.submission.create import check_account

    role = role or plans[0].role
    if role:  # one role for the pipeline and every step (checked against each plan below)
        plans = [dataclasses.replace(p, role=role, estimator=dataclasses.replace(p.estimator, role=role))
                 for p in plans]
    warnings: list[str] = []
    role_arn = ""
    checks = []
    for plan in plans:
        account = check_account(plan, clients, skip_role_check=skip_role_check, refuse_empty_channels=False)
        warnings += [w for w in account.warnings if w not in warnings]
        role_arn = account.role_arn
        checks.append(account.role_check)
    if not skip_role_check:
        checks.append(_check_pipeline_role(role_arn, region, clients, warnings))
    unretried = unretried_classes(retry) if retry is not None else []  # said only of classes the caller asked for
    if unretried:
        warnings.append(f"a pipeline step cannot retry {', '.join(unretried)}: SageMaker's retry policies name only "
                        "capacity, internal errors and resource limits, not exit codes (submit --retry can)")
    try:  # where each tarball and each step's drivers go: a key that holds their bytes, or a free one
        placed = [source_store.place(clients.s3, plan) for plan in plans]
        plans = [p.plan for p in placed]
        warnings += [p.note for p in placed if p.note and p.note not in warnings]
        built = build_pipeline(plans, name, role_arn, clients, retry)
        body = definition(built.pipeline)  # the SDK stages each step's drivers as it writes the definition
        moved = built.workflow.verify(clients.s3)
        if moved:  # a drivers folder held other content: built again with the folders the drivers will go to
            warnings += [note for _, note in moved.values() if note not in warnings]
            folders = {uri: folder for uri, (folder, _) in moved.items()}
            built = build_pipeline(plans, name, role_arn, clients, retry, drivers=folders)
            body = definition(built.pipeline)
    except LauncherError:
        raise
    except Exception as exc:
        raise explain(exc, "looking for where the steps' code goes in S3") from None
    arn = execution = None
    uploaded: list[str] = []
    if not dry_run:
        for put in placed:
            uri = put.plan.source.uri
            try:
                if uri not in uploaded and source_store.upload(clients.s3, put, put.plan.estimator.output_kms_key):
                    uploaded.append(uri)
            except Exception as exc:
                raise explain(exc, "uploading a source tarball") from None
        try:
            uploaded += built.workflow.upload(clients.s3)
        except LauncherError:
            raise
        except Exception as exc:
            raise explain(exc, "uploading a step's ModelTrainer drivers") from None
        arn = _upsert(built, role_arn, pipeline_tags(plans))
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


def _upsert(built: Built, role_arn: str, tags: list[dict[str, str]]) -> str:
    """Pipeline.upsert (create; update when it exists), its create untracked; returns the pipeline's ARN."""
    pipeline = built.pipeline
    pipeline.create = built.workflow.untracked_create(pipeline)  # the instance's, so upsert calls it
    try:
        with sdk_silent(), no_sdk_defaults(), _quiet_pipeline_warning():
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
