"""Failure scenarios a test can ask for, with the texts SageMaker writes, and managed spot's checkpoint sync.

Each constructor returns EmulatedJob settings (a dict), for `EmulatedJob(name, **settings)` or
`scenario.expect_attempts(prefix, [settings, ...])`. The texts are those of tests/fixtures/failure_reasons
and tests/fixtures/failure_corpus.json (each with the public page it came from).

Checkpoints: SageMaker copies /opt/ml/checkpoints to CheckpointConfig.S3Uri while a job runs and copies
that prefix back down when a job starts (https://docs.aws.amazon.com/sagemaker/latest/dg/model-checkpoints.html).
Here a job with `checkpoint_after` writes one checkpoint's objects under its URI at that moment of its
emulated run, and a job records at creation which objects it found there (`restored`).
"""
from __future__ import annotations

from typing import Any

from emulator import core

CAPACITY_REASON = ("CapacityError: Unable to provision requested ML compute capacity. Please retry using a "
                   "different ML instance type.")
CAPACITY_MESSAGE = "Insufficient capacity error from EC2 while launching instances, retrying!"
USER_SCRIPT_REASON = "AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nErrorMessage \"\""
OOM_LINES = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
             "capacity of 39.39 GiB of which 1.06 GiB is free.",)
NCCL_LINES = ("[rank0]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective "
              "operation timeout: WorkNCCL(SeqNum=7753, OpType=_REDUCE_SCATTER_BASE, NumelIn=544997376, "
              "NumelOut=68124672, Timeout(ms)=600000) ran for 600061 milliseconds before timing out.",)
INTERNAL_REASON = "InternalServerError: We encountered an internal error. Please try again."
HOST_MEMORY_REASON = ("ClientError: Please use an instance type with more memory, or reduce the size of job data "
                      "processed on an instance.")
SEGFAULT_REASON = "AlgorithmError: Exit Code: 139"
SEGFAULT_LINES = ("Fatal Python error: Segmentation fault",)
TRACEBACK_LINES = ("Traceback (most recent call last):", '  File "/opt/ml/code/train.py", line 120, in <module>',
                   "    main()", "KeyError: 'input_ids'")


def capacity_failure(**extra: Any) -> dict[str, Any]:
    """No instances: the job fails while Starting, with SageMaker's CapacityError, and logs nothing."""
    return {"outcome": "Failed", "fail_in": "Starting", "failure_reason": CAPACITY_REASON,
            "messages": {"Starting": CAPACITY_MESSAGE}, "decoy": False, **extra}


def out_of_memory(**extra: Any) -> dict[str, Any]:
    """A CUDA out-of-memory error in algo-1's log; the reason is the toolkit's ExecuteUserScriptError."""
    return {"outcome": "Failed", "failure_reason": USER_SCRIPT_REASON, "last_lines": OOM_LINES, **extra}


def nccl_timeout(**extra: Any) -> dict[str, Any]:
    """The NCCL watchdog's collective timeout in algo-1's log."""
    return {"outcome": "Failed", "failure_reason": USER_SCRIPT_REASON, "last_lines": NCCL_LINES, **extra}


def user_error(**extra: Any) -> dict[str, Any]:
    """The script raised: a traceback at the end of algo-1's log, exit code 1."""
    return {"outcome": "Failed", "failure_reason": USER_SCRIPT_REASON, "last_lines": TRACEBACK_LINES, **extra}


def internal_error(**extra: Any) -> dict[str, Any]:
    """SageMaker's own failure while the job trains: InternalServerError, nothing of the job's in the log."""
    return {"outcome": "Failed", "failure_reason": INTERNAL_REASON, "decoy": False, **extra}


def host_out_of_memory(**extra: Any) -> dict[str, Any]:
    """The instance's memory ran out: SageMaker's ClientError asking for an instance type with more memory."""
    return {"outcome": "Failed", "failure_reason": HOST_MEMORY_REASON, **extra}


def segfault(**extra: Any) -> dict[str, Any]:
    """The training process died of SIGSEGV: exit code 139, Python's fault handler's line, no traceback."""
    return {"outcome": "Failed", "failure_reason": SEGFAULT_REASON, "last_lines": SEGFAULT_LINES, **extra}


def max_runtime(**extra: Any) -> dict[str, Any]:
    """SageMaker stopped the job at MaxRuntimeInSeconds: Stopped, SecondaryStatus MaxRuntimeExceeded."""
    return {"outcome": "MaxRuntimeExceeded", **extra}


def spot_interrupted(interruptions: int = 1, checkpoint_after: float | None = 1.0, **extra: Any) -> dict[str, Any]:
    """Managed spot: the instances are taken back `interruptions` times, then MaxWaitTimeInSeconds runs out:
    Stopped with SecondaryStatus MaxWaitTimeExceeded. The job saves a checkpoint `checkpoint_after` seconds
    into its first Training."""
    return {"outcome": "MaxWaitTimeExceeded", "interruptions": interruptions, "checkpoint_after": checkpoint_after,
            "interrupt_after": 3.0, **extra}


# -- checkpoint sync ------------------------------------------------------------------------------------------

def _s3(account_id: str):
    from moto.s3.models import s3_backends

    return s3_backends[account_id]["aws"]


def _split(uri: str) -> tuple[str, str]:
    bucket, _, key = uri[len("s3://"):].partition("/")
    return bucket, key.rstrip("/")


def existing(account_id: str, uri: str) -> tuple[str, ...]:
    """The object keys under checkpoint URI `uri` (relative to it), sorted; () when the bucket is missing."""
    bucket, prefix = _split(uri)
    found = _s3(account_id).buckets.get(bucket)
    if found is None:
        return ()
    head = f"{prefix}/" if prefix else ""
    return tuple(sorted(k[len(head):] for k in list(found.keys.keys()) if k.startswith(head)))


def sync(job: Any, account_id: str) -> None:
    """Write the scripted job's checkpoint under its URI once its emulated run has reached it."""
    at = job.checkpoint_time() if job.created is not None else None
    if at is None or job.saved or not job.checkpoint_uri or core.now() < at:
        return
    bucket, prefix = _split(job.checkpoint_uri)
    step = f"step_{job.checkpoint_step:08d}"
    files = {f"{step}/__0_0.distcp": f"shard of {job.name}".encode(), f"{step}/.metadata": b"dcp metadata",
             f"{step}/.complete": b""}
    backend = _s3(account_id)
    if bucket not in backend.buckets:
        return
    for name, body in files.items():
        backend.put_object(bucket, f"{prefix}/{name}" if prefix else name, body)
    job.saved = tuple(sorted(files))
