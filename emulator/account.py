"""The demo account: what the README's first real submit needs, made in the emulator, so a newcomer can submit,
follow and stop a job without an AWS account.

`seed()` creates the output bucket, the job role with exactly the trust and permissions policies README.md
shows (its two json blocks; tests/test_demo_account.py holds them equal), the pipeline role docs/commands.md
shows, and the caller (moto's `moto` user, whom GetCallerIdentity names) allowed to pass both roles to
SageMaker. IAM's policy simulation (emulator/iam.py) then answers for these policies, so `check-role` says
pass, or fail with the missing action when a policy lacks one. `LIFECYCLE` is how a job submitted to the demo
runs (emulator.set_default): Starting, Downloading, Training with progress lines on every host, Uploading,
Completed.
"""
from __future__ import annotations

import json
from typing import Any

ACCOUNT = "123456789012"  # moto's account
CALLER = "moto"  # the IAM user moto's GetCallerIdentity names
REGION = "us-west-2"  # the example specs' cluster.region
BUCKET = "my-team-smp-bucket"
ROLE = "SMPTrainingRole"
PIPELINE_ROLE = "SMPPipelineRole"
SMP_IMAGE_REPOSITORY = "arn:aws:ecr:*:658645717510:repository/smdistributed-modelparallel"

# The job role's trust policy and permissions policy, as README.md shows them.
TRUST = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole",
                                                  "Principal": {"Service": "sagemaker.amazonaws.com"}}]}


def permissions(bucket: str = BUCKET) -> dict[str, Any]:
    """What a job's role needs: its bucket, CloudWatch metrics, the SMP image from ECR and its log streams."""
    return {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject"], "Resource": f"arn:aws:s3:::{bucket}/*"},
        {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": f"arn:aws:s3:::{bucket}"},
        {"Effect": "Allow", "Action": "cloudwatch:PutMetricData", "Resource": "*"},
        {"Effect": "Allow", "Action": "ecr:GetAuthorizationToken", "Resource": "*"},
        {"Effect": "Allow", "Action": ["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer",
                                       "ecr:BatchCheckLayerAvailability"], "Resource": SMP_IMAGE_REPOSITORY},
        {"Effect": "Allow", "Action": ["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
         "Resource": "arn:aws:logs:*:*:log-group:/aws/sagemaker/TrainingJobs:*"}]}


def pipeline_permissions(bucket: str = BUCKET, role: str = PIPELINE_ROLE) -> dict[str, Any]:
    """What a SageMaker Pipeline's role needs on top of a job's: start and read its steps' training jobs (tagged)
    and pass itself to them, as docs/commands.md shows it."""
    policy = permissions(bucket)
    policy["Statement"] = [*policy["Statement"],
                           {"Effect": "Allow", "Resource": "arn:aws:sagemaker:*:*:training-job/*",
                            "Action": ["sagemaker:CreateTrainingJob", "sagemaker:DescribeTrainingJob",
                                       "sagemaker:AddTags"]},
                           {"Effect": "Allow", "Action": "iam:PassRole", "Resource": f"arn:aws:iam::*:role/{role}",
                            "Condition": {"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}}}]
    return policy


# The caller's right to hand a role to SageMaker (CreateTrainingJob, a pipeline's upsert).
CALLER_POLICY = {"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Action": "iam:PassRole", "Resource": f"arn:aws:iam::{ACCOUNT}:role/*",
     "Condition": {"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}}}]}

# How a job submitted to the demo runs (EmulatedJob fields): about 40 s from Starting to Completed, a progress
# line a second on every host, metrics every 5 s.
LIFECYCLE = {"starting": 5.0, "downloading": 3.0, "training": 25.0, "uploading": 2.0, "line_interval": 1.0,
             "metric_interval": 5.0, "decoy": False}


def exports(endpoint: str, region: str = REGION) -> dict[str, str]:
    """The variables a shell exports to use the demo account: the emulator's endpoint and region, credentials it
    accepts, and the bucket and role the example specs read (`${SMP_LAUNCH_BUCKET}`, SMP_LAUNCH_ROLE)."""
    return {"AWS_ENDPOINT_URL": endpoint, "AWS_REGION": region, "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing", "SMP_LAUNCH_BUCKET": BUCKET, "SMP_LAUNCH_ROLE": ROLE}


def seed(session: Any, region: str = REGION) -> dict[str, str]:
    """Create the demo account's bucket, roles and caller through `session` (a boto3 Session pointed at the
    emulator); returns the roles' ARNs by name."""
    s3, iam = session.client("s3", region_name=region), session.client("iam", region_name=region)
    location = {} if region == "us-east-1" else {"CreateBucketConfiguration": {"LocationConstraint": region}}
    s3.create_bucket(Bucket=BUCKET, **location)
    arns = {}
    for name, policy in ((ROLE, permissions()), (PIPELINE_ROLE, pipeline_permissions())):
        arns[name] = iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(TRUST))["Role"]["Arn"]
        iam.put_role_policy(RoleName=name, PolicyName="smp-job", PolicyDocument=json.dumps(policy))
    iam.create_user(UserName=CALLER)
    iam.put_user_policy(UserName=CALLER, PolicyName="pass-roles", PolicyDocument=json.dumps(CALLER_POLICY))
    return arns
