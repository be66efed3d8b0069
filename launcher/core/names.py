"""AWS names smp-launch writes and reads, in one place, so a job's tags, logs and metrics always match.

Sources: the training jobs' CloudWatch Logs group
(https://docs.aws.amazon.com/sagemaker/latest/dg/logging-cloudwatch.html) and metrics namespace
(https://docs.aws.amazon.com/sagemaker/latest/dg/monitoring-cloudwatch.html), the training job
statuses of DescribeTrainingJob
(https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_DescribeTrainingJob.html), and the
checkpoint path SageMaker syncs (https://docs.aws.amazon.com/sagemaker/latest/dg/model-checkpoints.html).
"""
from __future__ import annotations

import re

from launcher.core.errors import UsageError
from launcher.core.sanitize import NAME_LIMIT, clean

LOG_GROUP = "/aws/sagemaker/TrainingJobs"
METRICS_NAMESPACE = "/aws/sagemaker/TrainingJobs"

# Tags smp-launch puts on every job it starts; `list` finds its jobs by MANAGED_TAG.
TAG_PREFIX = "smp-launch:"
MANAGED_TAG = "smp-launch:managed"
VERSION_TAG = "smp-launch:version"
SPEC_HASH_TAG = "smp-launch:spec-hash"
GIT_COMMIT_TAG = "smp-launch:git-commit"
RERUN_TAG = "smp-launch:rerun-of"  # on a job `rerun` started: the job whose stored plan it ran again

TERMINAL = ("Completed", "Failed", "Stopped")
RUNNING = ("InProgress", "Stopping")

ENTRY_POINT = "train.py"
CHECKPOINT_LOCAL_PATH = "/opt/ml/checkpoints"

# TrainingJobName as CreateTrainingJob and DescribeTrainingJob take it: 1-63 letters, digits and hyphens,
# starting and ending with a letter or digit
# (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_DescribeTrainingJob.html).
JOB_NAME = re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}")


def check_job_name(name: str) -> str:
    """`name` when SageMaker would take it as a training job name; else UsageError (exit 2), before any AWS
    call: SageMaker would only refuse it with a ValidationException."""
    if not isinstance(name, str) or not JOB_NAME.fullmatch(name):
        raise UsageError(f"'{clean(name, NAME_LIMIT)}' is not a training job name: SageMaker's are 1-63 letters, "
                         "digits and hyphens, starting and ending with a letter or digit")
    return name
