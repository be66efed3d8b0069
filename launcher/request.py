"""The CreateTrainingJob request the SDK will send for a plan, predicted without the SDK.

`plan` shows it and a contract test compares it, field by field, with what SDK v2 really sends
(captured with a botocore event hook), so what `plan` shows is what SageMaker gets.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from launcher.plan import Plan
from launcher.secrets import redact_request
from launcher.spec.loader import LoadedSpec

CONTAINER_LOG_LEVEL = 20  # logging.INFO, the SDK's default


def _hp(value: Any) -> str:
    return json.dumps(value)


def predict_request(plan: Plan, source_uri: str, role_arn: str) -> dict[str, Any]:
    est = plan.estimator
    params = plan.distribution["smdistributed"]["modelparallel"]["parameters"]
    hyper = {str(k): _hp(v) for k, v in est["hyperparameters"].items()}
    hyper.update({
        "sagemaker_submit_directory": _hp(source_uri),
        "sagemaker_program": _hp(est["entry_point"]),
        "sagemaker_container_log_level": _hp(CONTAINER_LOG_LEVEL),
        "sagemaker_job_name": _hp(plan.job_name),
        "sagemaker_region": _hp(plan.region),
        "mp_parameters": json.dumps(params),
        "sagemaker_distributed_dataparallel_enabled": _hp(False),
        "sagemaker_instance_type": _hp(est["instance_type"]),
        "sagemaker_torch_distributed_enabled": _hp(True),
    })
    request: dict[str, Any] = {
        "TrainingJobName": plan.job_name,
        "AlgorithmSpecification": {
            "TrainingInputMode": "File",
            "TrainingImage": plan.framework["image_uri"],
            "MetricDefinitions": est["metric_definitions"],
            "EnableSageMakerMetricsTimeSeries": True,
        },
        "RoleArn": role_arn,
        "OutputDataConfig": {"S3OutputPath": est["output_path"]},
        "ResourceConfig": {"VolumeSizeInGB": est["volume_size"], "InstanceCount": est["instance_count"],
                           "InstanceType": est["instance_type"]},
        "StoppingCondition": {"MaxRuntimeInSeconds": est["max_run"]},
        "HyperParameters": hyper,
        "Tags": est["tags"],
        "CheckpointConfig": {"S3Uri": est["checkpoint_s3_uri"], "LocalPath": est["checkpoint_local_path"]},
        "ProfilerConfig": {"DisableProfiler": True},
    }
    if plan.channels:
        request["InputDataConfig"] = [
            {"DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": uri,
                                             "S3DataDistributionType": "FullyReplicated"}},
             "ChannelName": name}
            for name, uri in plan.channels.items()
        ]
    if est["environment"]:
        request["Environment"] = est["environment"]
    if est.get("output_kms_key"):
        request["OutputDataConfig"]["KmsKeyId"] = est["output_kms_key"]
    if est.get("volume_kms_key"):
        request["ResourceConfig"]["VolumeKmsKeyId"] = est["volume_kms_key"]
    if est.get("use_spot_instances"):
        request["EnableManagedSpotTraining"] = True
        request["StoppingCondition"]["MaxWaitTimeInSeconds"] = est["max_wait"]
    if est.get("subnets"):
        request["VpcConfig"] = {"Subnets": est["subnets"], "SecurityGroupIds": est["security_group_ids"]}
    return request


@dataclass(frozen=True)
class Staged:
    """The rendered source dir, its tarball, where that lands in S3, and the request that will name it."""

    files: dict[str, str]
    data: bytes
    source_uri: str
    request: dict[str, Any]


def stage(loaded: LoadedSpec, plan: Plan, role_arn: str | None = None) -> Staged:
    """Render and pack the source dir and predict the request (as shown: secrets redacted); pure.

    A role given by name gets its ARN only from IAM, so without `role_arn` the request shows a
    placeholder that submit fills in.
    """
    from launcher.render import render_source
    from launcher.source import code_uri, tarball

    files = render_source(loaded, plan)
    data = tarball(files)
    source = code_uri(plan.estimator["code_location"], data)
    if role_arn is None:
        if not plan.role:
            role_arn = "<no role: set role or SMP_LAUNCH_ROLE>"
        else:
            role_arn = plan.role if plan.role.startswith("arn:") else f"<ARN of role {plan.role}>"
    return Staged(files, data, source, redact_request(predict_request(plan, source, role_arn)))
