"""The CreateTrainingJob request the SageMaker SDK will send for a plan, predicted without the SDK.

One prediction per backend (launcher.core.sdk): the PyTorch Estimator's request (SDK 2.x) and ModelTrainer's
(SDK 2.x and 3.x), which lay the job out differently. `plan` shows it, submit refuses to send an SDK-built request
that differs from it, and a contract test per backend compares the two field by field, so what `plan` shows is
what SageMaker gets.
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from launcher.core.sdk import BackendKind

if TYPE_CHECKING:
    from launcher.plan.build import Plan

CONTAINER_LOG_LEVEL = 20  # logging.INFO, the SDK's default

# ModelTrainer runs a job through its own drivers, sent as the `sm_drivers` channel beside the source's `code`
# channel: the container's entry point starts sm_train.sh, which unpacks the source and starts torchrun
# (sagemaker/train/constants.py and templates.py in SDK 3.x, sagemaker/modules/ in 2.x).
MT_ENTRYPOINT = ["/bin/bash"]
MT_ARGUMENTS = ["-c", "chmod +x /opt/ml/input/data/sm_drivers/sm_train.sh && "
                      "/opt/ml/input/data/sm_drivers/sm_train.sh"]
MT_CODE_CHANNEL = "code"
MT_DRIVERS_CHANNEL = "sm_drivers"
# The SDK's SMP config fields, in its order: ModelTrainer sends them as the mp_parameters hyperparameter, unset
# fields left out (sagemaker.train.distributed.SMP._to_mp_hyperparameters).
SMP_FIELDS = ("hybrid_shard_degree", "sm_activation_offloading", "activation_loading_horizon",
              "fsdp_cache_flush_warnings", "allow_empty_shards", "tensor_parallel_degree", "context_parallel_degree",
              "expert_parallel_degree", "random_seed")


ESTIMATOR_ORDER = ("TrainingJobName", "AlgorithmSpecification", "RoleArn", "OutputDataConfig", "ResourceConfig",
                   "StoppingCondition", "HyperParameters", "Tags", "CheckpointConfig", "ProfilerConfig",
                   "InputDataConfig", "Environment", "EnableManagedSpotTraining", "VpcConfig")
MODEL_TRAINER_ORDER = ("TrainingJobName", "AlgorithmSpecification", "RoleArn", "OutputDataConfig", "ResourceConfig",
                       "StoppingCondition", "HyperParameters", "Tags", "CheckpointConfig", "InputDataConfig",
                       "Environment", "EnableManagedSpotTraining", "VpcConfig")


def _hp(value: Any) -> str:
    return json.dumps(value)


def _mt_hp(value: Any) -> str:
    """A hyperparameter as ModelTrainer sends it: a string as it is, anything else as JSON (its safe_serialize)."""
    return value if isinstance(value, str) else json.dumps(value)


def predict_request(plan: Plan, source_uri: str, role_arn: str) -> dict[str, Any]:
    """The request the plan's backend builds (secrets NOT redacted)."""
    if plan.backend.kind is BackendKind.MODEL_TRAINER:
        return model_trainer_request(plan, source_uri, role_arn)
    return estimator_request(plan, source_uri, role_arn)


def smp_parameters(plan: Plan) -> dict[str, Any]:
    """The distribution's SMP parameters, as the SMP config both backends send them."""
    return dict(plan.distribution["smdistributed"]["modelparallel"]["parameters"])


def estimator_request(plan: Plan, source_uri: str, role_arn: str) -> dict[str, Any]:
    """The request as SDK 2.x's PyTorch Estimator builds it from the plan's arguments."""
    est = plan.estimator
    hyper = {str(k): _hp(v) for k, v in est.hyperparameters.items()}
    hyper.update({
        "sagemaker_submit_directory": _hp(source_uri),
        "sagemaker_program": _hp(est.entry_point),
        "sagemaker_container_log_level": _hp(CONTAINER_LOG_LEVEL),
        "sagemaker_job_name": _hp(plan.job_name),
        "sagemaker_region": _hp(plan.region),
        "mp_parameters": json.dumps(smp_parameters(plan)),
        "sagemaker_distributed_dataparallel_enabled": _hp(False),
        "sagemaker_instance_type": _hp(est.instance_type),
        "sagemaker_torch_distributed_enabled": _hp(True),
    })
    request = _common(plan, role_arn)
    request.update({
        "AlgorithmSpecification": {
            "TrainingInputMode": "File",
            "TrainingImage": plan.framework.image_uri,
            "MetricDefinitions": est.metric_definitions,
            "EnableSageMakerMetricsTimeSeries": True,
        },
        "HyperParameters": hyper,
        "ProfilerConfig": {"DisableProfiler": True},
    })
    if plan.channels:
        request["InputDataConfig"] = [
            {"DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": uri,
                                             "S3DataDistributionType": "FullyReplicated"}},
             "ChannelName": name}
            for name, uri in plan.channels.items()
        ]
    if est.use_spot_instances:
        request["EnableManagedSpotTraining"] = True
    return _ordered(request, ESTIMATOR_ORDER)


def _ordered(request: dict[str, Any], order: tuple[str, ...]) -> dict[str, Any]:
    """The request's keys in the order `plan --output json` has always shown them (a pipeline may diff its text)."""
    return {key: request[key] for key in (*order, *sorted(set(request) - set(order))) if key in request}


def drivers_uri(plan: Plan) -> str:
    """Where ModelTrainer uploads its drivers for this job: beside the source, under the code location
    (`<code location>/<base job name>/<job name>/input/sm_drivers`)."""
    return f"{plan.estimator.code_location.rstrip('/')}/{plan.base_job_name}/{plan.job_name}/input/{MT_DRIVERS_CHANNEL}"


def model_trainer_request(plan: Plan, source_uri: str, role_arn: str) -> dict[str, Any]:
    """The request as ModelTrainer builds it (`Torchrun(smp=SMP(...))`, the source tarball as its `code` channel)."""
    est = plan.estimator
    params = smp_parameters(plan)
    hyper = {str(k): _mt_hp(v) for k, v in est.hyperparameters.items()}
    hyper["mp_parameters"] = json.dumps({k: params[k] for k in SMP_FIELDS if params.get(k) is not None})
    channels = [*plan.channels.items(), (MT_CODE_CHANNEL, source_uri), (MT_DRIVERS_CHANNEL, drivers_uri(plan))]
    request = _common(plan, role_arn)
    request.update({
        "AlgorithmSpecification": {
            "TrainingInputMode": "File",
            "TrainingImage": plan.framework.image_uri,
            "ContainerEntrypoint": list(MT_ENTRYPOINT),
            "ContainerArguments": list(MT_ARGUMENTS),
            "MetricDefinitions": est.metric_definitions,
        },
        "HyperParameters": hyper,
        "InputDataConfig": [
            {"ChannelName": name, "InputMode": "File",
             "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": uri,
                                             "S3DataDistributionType": "FullyReplicated"}}}
            for name, uri in channels
        ],
    })
    request["OutputDataConfig"]["CompressionType"] = "GZIP"
    if est.use_spot_instances:
        request["EnableManagedSpotTraining"] = True
    return _ordered(request, MODEL_TRAINER_ORDER)


def _common(plan: Plan, role_arn: str) -> dict[str, Any]:
    """What both backends send alike."""
    est = plan.estimator
    request: dict[str, Any] = {
        "TrainingJobName": plan.job_name,
        "RoleArn": role_arn,
        "OutputDataConfig": {"S3OutputPath": est.output_path},
        "ResourceConfig": {"VolumeSizeInGB": est.volume_size, "InstanceCount": est.instance_count,
                           "InstanceType": est.instance_type},
        "StoppingCondition": {"MaxRuntimeInSeconds": est.max_run},
        "Tags": est.tags,
        "CheckpointConfig": {"S3Uri": est.checkpoint_s3_uri, "LocalPath": est.checkpoint_local_path},
    }
    if est.environment:
        request["Environment"] = est.environment
    if est.output_kms_key:
        request["OutputDataConfig"]["KmsKeyId"] = est.output_kms_key
    if est.volume_kms_key:
        request["ResourceConfig"]["VolumeKmsKeyId"] = est.volume_kms_key
    if est.keep_alive_period_in_seconds:
        request["ResourceConfig"]["KeepAlivePeriodInSeconds"] = est.keep_alive_period_in_seconds
    if est.use_spot_instances:
        request["StoppingCondition"]["MaxWaitTimeInSeconds"] = est.max_wait
    if est.subnets:
        request["VpcConfig"] = {"Subnets": est.subnets, "SecurityGroupIds": est.security_group_ids}
    return request
