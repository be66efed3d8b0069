"""End to end: `submit --retry` (the installed CLI as a subprocess) against the lifecycle emulator's server.

In one retried submit, a capacity failure is retried under a linked name and tag, and a managed spot job
interrupted after it saved a checkpoint is resubmitted with the same checkpoint URI and resumes from it.
"""
import json

from emulator import failures as scenarios
from emulator import scenario
from launcher.orchestrate.retry import ATTEMPT_TAG, RETRY_OF_TAG
from tests.aws_setup import BUCKET
from tests.conftest import JOBS

QUICK = dict(starting=0.1, downloading=0.05, training=0.4, uploading=0.05, line_interval=0.1, decoy=False)


def _tags(sm, name):
    arn = sm.describe_training_job(TrainingJobName=name)["TrainingJobArn"]
    return {t["Key"]: t["Value"] for t in sm.list_tags(ResourceArn=arn)["Tags"]}


def test_a_capacity_failure_and_a_spot_interruption_are_retried_to_a_resumed_success(server_world):
    """One `submit --retry capacity,spot` (a spot job): attempt 1 fails for capacity, attempt 2 is interrupted
    after it saved a checkpoint, attempt 3 resumes from that checkpoint and completes. Each retry is a linked
    name and tag; every attempt keeps the first attempt's checkpoint URI."""
    session, cli = server_world.session, server_world.cli
    scenario.expect_attempts("llama2-7b-", [
        scenarios.capacity_failure(**QUICK),
        scenarios.spot_interrupted(interruptions=1, checkpoint_after=0.4,
                                   **{**QUICK, "interrupt_after": 0.8, "interrupted_for": 0.3, "stopping": 0.3}),
        dict(QUICK)])
    out = cli("submit", "jobs/llama7b.yaml", "--set", "role=Good", "--set", "cluster.spot=true",
              "--retry", "capacity,spot", "--max-attempts", "3", "--retry-backoff", "0", "--interval", "0.1",
              "--output", "json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    first, second, third = (a["job_name"] for a in result["attempts"])
    sm = session.client("sagemaker")

    # A capacity failure is retried under a linked name and tag.
    assert second == f"{first}-r2" and third == f"{first}-r3"
    assert result["job_name"] == third and result["status"] == "Completed"
    assert [(a["status"], a["failure_class"]) for a in result["attempts"]] == [
        ("Failed", "capacity"), ("Stopped", "spot_interruption"), ("Completed", None)], result["attempts"]
    assert sm.describe_training_job(TrainingJobName=first)["FailureReason"].startswith("CapacityError")
    tags = _tags(sm, second)
    assert tags[RETRY_OF_TAG] == first and tags[ATTEMPT_TAG] == "2" and tags["smp-launch:managed"] == "true"
    assert RETRY_OF_TAG not in _tags(sm, first)
    assert f"{first}: Failed [capacity]" in out.stderr and f"started {second}" in out.stderr
    tags = _tags(sm, third)
    assert tags[RETRY_OF_TAG] == second and tags[ATTEMPT_TAG] == "3"

    # A spot interruption after a checkpoint is resubmitted with the same checkpoint URI and resumes from it.
    one, two = (sm.describe_training_job(TrainingJobName=n) for n in (second, third))
    assert (one["TrainingJobStatus"], one["SecondaryStatus"]) == ("Stopped", "MaxWaitTimeExceeded")
    assert "Interrupted" in [t["Status"] for t in one["SecondaryStatusTransitions"]]
    assert one["EnableManagedSpotTraining"] is True and two["EnableManagedSpotTraining"] is True
    uri = one["CheckpointConfig"]["S3Uri"]
    assert two["CheckpointConfig"]["S3Uri"] == uri and uri.endswith(f"/checkpoints/{first}")
    assert sm.describe_training_job(TrainingJobName=first)["CheckpointConfig"]["S3Uri"] == uri
    # What the interrupted job saved is in S3 under that URI, and it is what the next job found when it started.
    saved, restored = scenario.get(second).saved, scenario.get(third).restored
    assert saved and restored == saved
    prefix = uri[len(f"s3://{BUCKET}/"):]
    keys = {o["Key"] for o in session.client("s3").list_objects_v2(Bucket=BUCKET, Prefix=prefix)["Contents"]}
    assert keys == {f"{prefix}/{k}" for k in saved}
    logs = cli("logs", third, "--no-follow", "--host", "1")
    assert "resuming from checkpoint step_00000010" in logs.stdout, logs.stdout + logs.stderr


def test_an_out_of_memory_remedy_comes_from_the_jobs_own_plan(server_world):
    """`wait` reads algo-1's log tail (the OOM) and the plan.json in the job's source tarball (the layout).

    The job is started through the library (what the CLI's submit is a shell over, tested end to end in
    test_e2e_submit.py), which records it as `latest` in this test's state folder; `wait latest` is the CLI."""
    import os

    from launcher import api

    cli = server_world.cli
    scenario.expect_attempts("llama2-7b-", [scenarios.out_of_memory(**QUICK)])
    plan = api.build_plan(api.load_spec(str(JOBS / "llama7b.yaml"), ["role=Good"]))
    started = api.submit(plan)
    assert started.job_name and started.remembered
    out = cli("wait", "latest", "--interval", "0.1", "--output", "json",
              extra_env={"XDG_STATE_HOME": os.environ["XDG_STATE_HOME"]})
    assert out.returncode == 1, out.stderr
    (row,) = json.loads(out.stdout)
    assert row["failure_class"] == "out_of_memory"
    modelled = f"{plan.memory.per_gpu_gb:.1f} of 40 GB"  # the figure comes from the job's own stored plan
    assert "smp.tensor_parallel_degree: 2" in row["remedy"] and modelled in row["remedy"], row["remedy"]


def test_the_default_classes_and_an_exit_code_are_retried_and_others_are_not(server_world):
    """`submit --retry default,exit:139`: SageMaker's internal error is retried (a default class), a segfault
    (exit 139) is retried by its exit code, and the third attempt completes."""
    cli = server_world.cli
    scenario.expect_attempts("llama2-7b-", [scenarios.internal_error(**QUICK), scenarios.segfault(**QUICK),
                                            dict(QUICK)])
    out = cli("submit", "jobs/llama7b.yaml", "--set", "role=Good", "--retry", "default,exit:139",
              "--max-attempts", "3", "--retry-backoff", "0", "--interval", "0.1", "--output", "json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert [(a["status"], a["failure_class"]) for a in result["attempts"]] == [
        ("Failed", "internal_error"), ("Failed", "unknown"), ("Completed", None)], result["attempts"]
    assert 'SageMaker says: "Please try again."' in result["attempts"][0]["remedy"]
    assert "exit code 139" in result["attempts"][1]["remedy"]


def test_a_class_not_asked_for_ends_the_retries(server_world):
    cli = server_world.cli
    scenario.expect_attempts("llama2-7b-", [scenarios.host_out_of_memory(**QUICK), dict(QUICK)])
    out = cli("submit", "jobs/llama7b.yaml", "--set", "role=Good", "--retry", "default", "--retry-backoff", "0",
              "--interval", "0.1", "--output", "json")
    assert out.returncode == 1, out.stderr
    (only,) = json.loads(out.stdout)["attempts"]
    assert only["failure_class"] == "host_out_of_memory"
    assert 'SageMaker says: "Please use an instance type with more memory' in only["remedy"]
