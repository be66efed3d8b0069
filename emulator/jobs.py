"""Start a scripted job the way `smp-launch submit` would: CreateTrainingJob with the tool's tag."""
from __future__ import annotations

from typing import Any

from emulator.scenario import EmulatedJob, expect

IMAGE = "658645717510.dkr.ecr.us-west-2.amazonaws.com/smdistributed-modelparallel:2.4.1-gpu-py311-cu121"
ROLE = "arn:aws:iam::123456789012:role/SMPTrainingRole"


def add_job(job: EmulatedJob, sagemaker_client: Any, managed: bool = True) -> EmulatedJob:
    """Script `job`, then create it through `sagemaker_client` (counted nowhere a test measures)."""
    expect(job)
    tags = [{"Key": "team", "Value": "nlp"}]
    if managed:
        tags.append({"Key": "smp-launch:managed", "Value": "true"})
    sagemaker_client.create_training_job(
        TrainingJobName=job.name,
        AlgorithmSpecification={"TrainingImage": IMAGE, "TrainingInputMode": "File"},
        RoleArn=ROLE,
        OutputDataConfig={"S3OutputPath": "s3://smp-emulator/output"},
        ResourceConfig={"InstanceType": job.instance_type, "InstanceCount": job.hosts, "VolumeSizeInGB": 400},
        StoppingCondition={"MaxRuntimeInSeconds": 86400},
        Tags=tags,
    )
    return job
