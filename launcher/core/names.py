"""AWS names smp-launch writes and reads, in one place, so a job's tags, logs and metrics always match.

Sources: the training jobs' CloudWatch Logs group
(https://docs.aws.amazon.com/sagemaker/latest/dg/logging-cloudwatch.html) and metrics namespace
(https://docs.aws.amazon.com/sagemaker/latest/dg/monitoring-cloudwatch.html), the training job
statuses of DescribeTrainingJob
(https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_DescribeTrainingJob.html), and the
checkpoint path SageMaker syncs (https://docs.aws.amazon.com/sagemaker/latest/dg/model-checkpoints.html).
"""
from __future__ import annotations

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
