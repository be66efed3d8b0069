"""The CreateTrainingJob request the SDK will send for a plan, predicted without the SDK.

`plan` shows it and a contract test compares it, field by field, with what SDK v2 really sends
(captured with a botocore event hook), so what `plan` shows is what SageMaker gets.
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from launcher.plan.build import Plan

CONTAINER_LOG_LEVEL = 20  # logging.INFO, the SDK's default


def _hp(value: Any) -> str:
    return json.dumps(value)


def predict_request(plan: Plan, source_uri: str, role_arn: str) -> dict[str, Any]:
    """The request as the SDK builds it from the plan's Estimator arguments (secrets NOT redacted)."""
    est = plan.estimator
    params = plan.distribution["smdistributed"]["modelparallel"]["parameters"]
    hyper = {str(k): _hp(v) for k, v in est.hyperparameters.items()}
    hyper.update({
        "sagemaker_submit_directory": _hp(source_uri),
        "sagemaker_program": _hp(est.entry_point),
        "sagemaker_container_log_level": _hp(CONTAINER_LOG_LEVEL),
        "sagemaker_job_name": _hp(plan.job_name),
        "sagemaker_region": _hp(plan.region),
        "mp_parameters": json.dumps(params),
        "sagemaker_distributed_dataparallel_enabled": _hp(False),
        "sagemaker_instance_type": _hp(est.instance_type),
        "sagemaker_torch_distributed_enabled": _hp(True),
    })
    request: dict[str, Any] = {
        "TrainingJobName": plan.job_name,
        "AlgorithmSpecification": {
            "TrainingInputMode": "File",
            "TrainingImage": plan.framework.image_uri,
            "MetricDefinitions": est.metric_definitions,
            "EnableSageMakerMetricsTimeSeries": True,
        },
        "RoleArn": role_arn,
        "OutputDataConfig": {"S3OutputPath": est.output_path},
        "ResourceConfig": {"VolumeSizeInGB": est.volume_size, "InstanceCount": est.instance_count,
                           "InstanceType": est.instance_type},
        "StoppingCondition": {"MaxRuntimeInSeconds": est.max_run},
        "HyperParameters": hyper,
        "Tags": est.tags,
        "CheckpointConfig": {"S3Uri": est.checkpoint_s3_uri, "LocalPath": est.checkpoint_local_path},
        "ProfilerConfig": {"DisableProfiler": True},
    }
    if plan.channels:
        request["InputDataConfig"] = [
            {"DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": uri,
                                             "S3DataDistributionType": "FullyReplicated"}},
             "ChannelName": name}
            for name, uri in plan.channels.items()
        ]
    if est.environment:
        request["Environment"] = est.environment
    if est.output_kms_key:
        request["OutputDataConfig"]["KmsKeyId"] = est.output_kms_key
    if est.volume_kms_key:
        request["ResourceConfig"]["VolumeKmsKeyId"] = est.volume_kms_key
    if est.keep_alive_period_in_seconds:
        request["ResourceConfig"]["KeepAlivePeriodInSeconds"] = est.keep_alive_period_in_seconds
    if est.use_spot_instances:
        request["EnableManagedSpotTraining"] = True
        request["StoppingCondition"]["MaxWaitTimeInSeconds"] = est.max_wait
    if est.subnets:
        request["VpcConfig"] = {"Subnets": est.subnets, "SecurityGroupIds": est.security_group_ids}
    return request
