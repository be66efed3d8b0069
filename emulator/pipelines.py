"""Pipeline executions that run: each TrainingStep becomes a training job, in order, with the execution's values.

moto stores a pipeline and answers StartPipelineExecution with an execution that is `Succeeded` at once and
runs nothing; it has no ListPipelineExecutionSteps. Here an execution walks its definition as SageMaker
Pipelines does (https://docs.aws.amazon.com/sagemaker/latest/dg/build-and-manage-steps.html):
- parameters: the definition's defaults, replaced by the values the execution was started with;
- expressions: `Get` of Parameters.*, Execution.PipelineExecutionId and Steps.<name>.<property> (a finished
  step's ModelArtifacts and CheckpointConfig), and `Std:Join`;
- a step starts when the steps it depends on succeeded; its job is a real emulated job (emulator.scenario), so
  it takes time on the emulator clock and can fail as scripted; the request it was created with is kept where
  submit's are (emulator.sagemaker.received), Environment included, which moto's job does not keep;
- a step whose S3 input channel names a prefix with no object under it starts no job and fails, as
  CreateTrainingJob refuses such a request ("No S3 objects found under S3 URL ... given in input data source":
  https://github.com/aws/amazon-sagemaker-examples/issues/2267); a channel an earlier step's output feeds is
  not checked (the emulated jobs write no model artefact);
- RetryPolicies: a failed job whose reason names a capacity shortage, an internal error or a resource limit is
  started again while the matching policy allows (SageMaker.CAPACITY_ERROR, JOB_INTERNAL_ERROR, RESOURCE_LIMIT);
- CacheConfig: a step whose cache-key attributes resolve to those of an earlier successful run of the same step
  of the same pipeline, within ExpireAfter, is a cache hit that starts no job
  (https://docs.aws.amazon.com/sagemaker/latest/dg/pipelines-default-keys.html lists the attributes).
The execution advances whenever it is read (DescribePipelineExecution, ListPipelineExecutionSteps).
"""
from __future__ import annotations

import functools
import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from emulator import core

# A training step's cache key: these attributes of its arguments.
CACHE_KEY = ("AlgorithmSpecification", "CheckpointConfig", "DebugHookConfig", "DebugRuleConfigurations",
             "Environment", "HyperParameters", "InputDataConfig")
# What a failure reason says -> the exception type a SageMakerJobStepRetryPolicy names.
RETRYABLE = (("CapacityError", "SageMaker.CAPACITY_ERROR"),
             ("InsufficientInstanceCapacity", "SageMaker.CAPACITY_ERROR"),
             ("InternalServerError", "SageMaker.JOB_INTERNAL_ERROR"),
             ("ResourceLimitExceeded", "SageMaker.RESOURCE_LIMIT"))


@dataclass
class StepRun:
    name: str
    arguments: dict[str, Any]
    depends_on: tuple[str, ...]
    retry: tuple[dict[str, Any], ...]
    cache: dict[str, Any] | None
    status: str = "Pending"  # Pending | Executing | Succeeded | Failed
    job_name: str | None = None
    attempts: int = 0
    retry_at: float | None = None
    started: float | None = None
    ended: float | None = None
    failure: str | None = None
    cache_source: str | None = None  # the execution whose result a cache hit reused
    key: str | None = None
    outputs: dict[str, Any] = field(default_factory=dict)


@dataclass
class ExecutionRun:
    arn: str
    pipeline: str
    values: dict[str, Any]
    steps: list[StepRun]
    status: str = "Executing"
    failure: str | None = None


_RUNS: dict[str, ExecutionRun] = {}
_CACHE: dict[tuple[str, str, str], tuple[float, str, dict[str, Any]]] = {}  # (pipeline, step, key) -> when, exec, out


def forget_all() -> None:
    with core.lock():
        _RUNS.clear()
        _CACHE.clear()


def _duration_seconds(text: str | None) -> float:
    """ExpireAfter (ISO 8601: P30D, PT12H, P1DT5H30M); no value: forever."""
    if not text:
        return float("inf")
    match = re.fullmatch(r"[pP](?:(\d+)[yY])?(?:(\d+)[mM])?(?:(\d+)[wW])?(?:(\d+)[dD])?"
                         r"(?:[tT](?:(\d+)[hH])?(?:(\d+)[mM])?)?", text.strip())
    if not match:
        return float("inf")
    y, mo, w, d, h, mi = (int(g or 0) for g in match.groups())
    return (((y * 365 + mo * 30 + w * 7 + d) * 24 + h) * 60 + mi) * 60.0


def resolve(value: Any, run: ExecutionRun, steps: dict[str, StepRun]) -> Any:
    """`value` (a step's arguments) with every expression replaced by its value in `run`."""
    if isinstance(value, list):
        return [resolve(v, run, steps) for v in value]
    if not isinstance(value, dict):
        return value
    if set(value) == {"Get"}:
        path = str(value["Get"])
        if path.startswith("Parameters."):
            return run.values[path.split(".", 1)[1]]
        if path == "Execution.PipelineExecutionId":
            return run.arn.rsplit("/", 1)[1]
        if path == "Execution.PipelineExecutionArn":
            return run.arn
        if path.startswith("Steps."):
            _, step, *rest = path.split(".")
            node: Any = steps[step].outputs
            for key in rest:
                node = node[key]
            return node
        raise KeyError(f"the emulator cannot resolve {path}")
    if set(value) == {"Std:Join"}:
        join = value["Std:Join"]
        return str(join.get("On", "")).join(str(resolve(v, run, steps)) for v in join.get("Values", []))
    return {k: resolve(v, run, steps) for k, v in value.items()}


def _parameters(definition: dict[str, Any], given: list[dict[str, str]] | None) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for p in definition.get("Parameters", []):
        values[p["Name"]] = p.get("DefaultValue")
    for p in given or []:
        declared = next((d for d in definition.get("Parameters", []) if d["Name"] == p["Name"]), None)
        if declared is None:
            from moto.sagemaker.exceptions import ValidationError

            raise ValidationError(message=f"Parameter {p['Name']} is not defined in the pipeline definition")
        values[p["Name"]] = int(p["Value"]) if declared.get("Type") == "Integer" else p["Value"]
    return values


def _steps(definition: dict[str, Any]) -> list[StepRun]:
    out = []
    for step in definition.get("Steps", []):
        if step.get("Type") != "Training":
            continue
        out.append(StepRun(name=step["Name"], arguments=step.get("Arguments", {}),
                           depends_on=tuple(step.get("DependsOn", [])), retry=tuple(step.get("RetryPolicies", [])),
                           cache=step.get("CacheConfig")))
    return out


def _cache_key(arguments: dict[str, Any]) -> str:
    body = {k: arguments.get(k) for k in CACHE_KEY}
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()


def _job_name(run: ExecutionRun, step: StepRun) -> str:
    exec_id = run.arn.rsplit("/", 1)[1]
    return f"pipelines-{exec_id}-{step.name}"[:56] + f"-{step.attempts:02d}"[-7:]


def _empty_channel(backend: Any, unresolved: dict[str, Any], args: dict[str, Any]) -> str | None:
    """SageMaker's refusal of a request whose S3Prefix channel has no object under it (None: every channel has)."""
    from emulator.failures import _s3

    for raw, channel in zip(unresolved.get("InputDataConfig") or [], args.get("InputDataConfig") or [], strict=False):
        source = channel.get("DataSource", {}).get("S3DataSource", {})
        if source.get("S3DataType", "S3Prefix") != "S3Prefix" or '"Steps.' in json.dumps(raw):
            continue
        uri = str(source.get("S3Uri", ""))
        bucket, _, prefix = uri[len("s3://"):].partition("/")
        found = _s3(backend.account_id).buckets.get(bucket)
        if found is None or not any(key.startswith(prefix) for key in list(found.keys.keys())):
            return (f"No S3 objects found under S3 URL \"{uri}\" given in input data source. Please ensure that the "
                    f"bucket exists in the selected region ({backend.region_name}), that objects exist under that S3 "
                    f"prefix, and that the role \"{args.get('RoleArn', '')}\" has \"s3:ListBucket\" permissions on "
                    f"bucket \"{bucket}\".")
    return None


def _start(backend: Any, run: ExecutionRun, step: StepRun, steps: dict[str, StepRun]) -> None:
    from emulator.sagemaker import RECEIVED

    args = resolve(step.arguments, run, steps)
    step.started = step.started or core.now()
    if step.cache and step.cache.get("Enabled"):
        step.key = _cache_key(args)
        hit = _CACHE.get((run.pipeline, step.name, step.key))
        if hit and core.now() - hit[0] <= _duration_seconds(step.cache.get("ExpireAfter")):
            step.status, step.cache_source, step.outputs = "Succeeded", hit[1], dict(hit[2])
            step.ended = core.now()
            return
    step.attempts += 1
    refused = _empty_channel(backend, step.arguments, args)
    if refused:
        step.status, step.failure, step.ended = "Failed", refused, core.now()
        run.status, run.failure = "Failed", f"Step failure: One or multiple steps failed. {refused}"
        return
    step.job_name = _job_name(run, step)
    RECEIVED[step.job_name] = {"TrainingJobName": step.job_name, **args}
    backend.create_training_job(
        training_job_name=step.job_name, hyper_parameters=args.get("HyperParameters", {}),
        algorithm_specification=args.get("AlgorithmSpecification", {}), role_arn=args.get("RoleArn", ""),
        input_data_config=args.get("InputDataConfig", []), output_data_config=args.get("OutputDataConfig", {}),
        resource_config=args.get("ResourceConfig", {}), vpc_config=args.get("VpcConfig"),
        stopping_condition=args.get("StoppingCondition", {}), tags=args.get("Tags", []),
        enable_network_isolation=False, enable_inter_container_traffic_encryption=False,
        enable_managed_spot_training=bool(args.get("EnableManagedSpotTraining")),
        checkpoint_config=args.get("CheckpointConfig"), debug_hook_config=args.get("DebugHookConfig"),
        debug_rule_configurations=args.get("DebugRuleConfigurations"),
        tensor_board_output_config=args.get("TensorBoardOutputConfig"), experiment_config=None)
    step.status = "Executing"
    step.outputs = {"CheckpointConfig": args.get("CheckpointConfig") or {}}


def _retry_delay(step: StepRun, reason: str) -> float | None:
    """Seconds before the next attempt, when a retry policy covers `reason` and has attempts left."""
    kinds = {kind for marker, kind in RETRYABLE if marker in reason}
    for policy in step.retry:
        if kinds & set(policy.get("ExceptionType", [])) and step.attempts <= int(policy.get("MaxAttempts", 0)):
            interval = float(policy.get("IntervalSeconds", 1))
            return interval * float(policy.get("BackoffRate", 2.0)) ** (step.attempts - 1)
    return None


def advance(backend: Any, run: ExecutionRun) -> None:
    """Move the execution on as far as the emulator clock allows."""
    from emulator.sagemaker import refresh

    steps = {s.name: s for s in run.steps}
    progressed = True
    while progressed and run.status == "Executing":
        progressed = False
        for step in run.steps:
            if step.status == "Pending" and all(steps[d].status == "Succeeded" for d in step.depends_on):
                if step.retry_at is not None and core.now() < step.retry_at:
                    continue
                step.retry_at = None
                _start(backend, run, step, steps)
                progressed = True
            elif step.status == "Executing" and step.job_name:
                job = backend.training_jobs.get(step.job_name)
                refresh(job)
                status = job.training_job_status
                if status == "Completed":
                    step.status, step.ended = "Succeeded", core.now()
                    step.outputs["ModelArtifacts"] = dict(job.model_artifacts)
                    if step.key:
                        _CACHE[(run.pipeline, step.name, step.key)] = (core.now(), run.arn, dict(step.outputs))
                    progressed = True
                elif status in ("Failed", "Stopped"):
                    reason = job.failure_reason or status
                    delay = _retry_delay(step, reason) if status == "Failed" else None
                    if delay is not None:
                        step.status, step.retry_at = "Pending", core.now() + delay
                    else:
                        step.status, step.failure, step.ended = "Failed", reason, core.now()
                        run.status, run.failure = "Failed", f"Step failure: One or multiple steps failed. {reason}"
                    progressed = True
        if all(s.status == "Succeeded" for s in run.steps):
            run.status = "Succeeded"


def _apply() -> None:
    from moto.sagemaker import models, responses
    from moto.sagemaker.utils import get_pipeline_execution_from_arn

    backend = models.SageMakerModelBackend
    original_start = backend.start_pipeline_execution
    original_describe = backend.describe_pipeline_execution

    @functools.wraps(original_start)
    def start_pipeline_execution(self, pipeline_name: str, display_name: str, parameters: Any, *args: Any,
                                 **kwargs: Any) -> dict[str, str]:
        with core.lock():
            pipeline = self.pipelines.get(pipeline_name)
            definition = json.loads(pipeline.pipeline_definition) if pipeline else {}
            values = _parameters(definition, parameters)
            response = original_start(self, pipeline_name, display_name, parameters, *args, **kwargs)
            arn = response["PipelineExecutionArn"]
            run = _RUNS[arn] = ExecutionRun(arn=arn, pipeline=pipeline_name, values=values, steps=_steps(definition))
            get_pipeline_execution_from_arn(self.pipelines, arn).pipeline_execution_status = "Executing"
            advance(self, run)
            _sync(self, run)
            return response

    @functools.wraps(original_describe)
    def describe_pipeline_execution(self, arn: str) -> dict[str, Any]:
        with core.lock():
            run = _RUNS.get(arn)
            if run is not None:
                advance(self, run)
                _sync(self, run)
            out = original_describe(self, arn)
            if run is not None and run.failure:
                out["FailureReason"] = run.failure
            return out

    def list_pipeline_execution_steps(self: Any, arn: str) -> list[dict[str, Any]]:
        with core.lock():
            run = _RUNS.get(arn)
            if run is None:
                get_pipeline_execution_from_arn(self.pipelines, arn)  # raises for an unknown execution
                return []
            advance(self, run)
            _sync(self, run)
            out = []
            for step in reversed([s for s in run.steps if s.status != "Pending" or s.attempts]):
                item: dict[str, Any] = {"StepName": step.name, "StepStatus": step.status,
                                        "AttemptCount": max(1, step.attempts),
                                        "StartTime": core.moto_time(step.started or core.now())}
                if step.ended is not None:
                    item["EndTime"] = core.moto_time(step.ended)
                if step.failure:
                    item["FailureReason"] = step.failure[:1024]
                if step.cache_source:
                    item["CacheHitResult"] = {"SourcePipelineExecutionArn": step.cache_source}
                elif step.job_name:
                    job = self.training_jobs.get(step.job_name)
                    item["Metadata"] = {"TrainingJob": {"Arn": job.arn if job else step.job_name}}
                out.append(item)
            return out

    def steps_response(self: Any) -> Any:
        steps = self.sagemaker_backend.list_pipeline_execution_steps(self._get_param("PipelineExecutionArn"))
        return responses.ActionResult({"PipelineExecutionSteps": steps})

    backend.start_pipeline_execution = start_pipeline_execution
    backend.describe_pipeline_execution = describe_pipeline_execution
    backend.list_pipeline_execution_steps = list_pipeline_execution_steps
    responses.SageMakerResponse.list_pipeline_execution_steps = steps_response


def _sync(backend: Any, run: ExecutionRun) -> None:
    from moto.sagemaker.utils import get_pipeline_execution_from_arn

    from emulator.events import announce_execution

    execution = get_pipeline_execution_from_arn(backend.pipelines, run.arn)
    before = execution.pipeline_execution_status
    execution.pipeline_execution_status = run.status
    execution.pipeline_execution_failure_reason = run.failure
    if run.status != before and run.status in ("Succeeded", "Failed", "Stopped"):
        announce_execution(run.arn, backend.pipelines[run.pipeline].arn, run.status, before)


def run_of(arn: str) -> ExecutionRun | None:
    """The emulator's view of an execution (tests read which jobs it started and with what)."""
    return _RUNS.get(arn)


core.register_patch("sagemaker:pipeline-executions", _apply)
core.register_reset(forget_all)
