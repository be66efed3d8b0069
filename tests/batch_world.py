"""An AWS Batch world for the queue tests: the usual bucket and roles, a caller allowed to submit service jobs,
and SageMaker training queues on service environments of a given capacity (emulator/batch.py)."""
from __future__ import annotations

import json

from tests.aws_setup import ACCOUNT, REGION, create_world

QUEUE = "smp-queue"
FAIR_QUEUE = "smp-fair"
CAPACITY = 2  # instances in the main queue's service environment


def submit_policy(resource: str = f"arn:aws:batch:{REGION}:{ACCOUNT}:job-queue/*") -> dict:
    return {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": "batch:SubmitServiceJob", "Resource": resource}]}


def create_queues(session, capacity: int = CAPACITY, allow_submit: bool = True) -> dict[str, str]:
    """A FIFO queue (QUEUE) on an environment of `capacity` instances and a fair-share one (FAIR_QUEUE); the
    caller (moto's `moto` user) may submit to them unless not `allow_submit`. Their ARNs by name."""
    batch = session.client("batch")
    batch.create_service_environment(serviceEnvironmentName="smp-env", serviceEnvironmentType="SAGEMAKER_TRAINING",
                                     capacityLimits=[{"maxCapacity": capacity, "capacityUnit": "NUM_INSTANCES"}])
    arns = {QUEUE: batch.create_job_queue(
        jobQueueName=QUEUE, priority=1, jobQueueType="SAGEMAKER_TRAINING",
        serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": "smp-env"}])["jobQueueArn"]}
    policy = batch.create_scheduling_policy(name="fair", fairsharePolicy={})["arn"]
    batch.create_service_environment(serviceEnvironmentName="fair-env", serviceEnvironmentType="SAGEMAKER_TRAINING",
                                     capacityLimits=[{"maxCapacity": 1, "capacityUnit": "NUM_INSTANCES"}])
    arns[FAIR_QUEUE] = batch.create_job_queue(
        jobQueueName=FAIR_QUEUE, priority=1, jobQueueType="SAGEMAKER_TRAINING", schedulingPolicyArn=policy,
        serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": "fair-env"}])["jobQueueArn"]
    if allow_submit:
        session.client("iam").put_user_policy(UserName="moto", PolicyName="batch",
                                              PolicyDocument=json.dumps(submit_policy()))
    return arns


def create_batch_world(session) -> dict[str, str]:
    """`create_world` (bucket, roles Good / NoTrust / NoPerms, the caller) and the queues."""
    arns = create_world(session)
    arns.update(create_queues(session))
    return arns
