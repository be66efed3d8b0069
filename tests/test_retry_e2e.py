"""End to end: `submit --retry` (the installed CLI as a subprocess) against the lifecycle emulator's server.

A capacity failure is retried to success under a linked name and tag; a managed spot job interrupted after
it saved a checkpoint is resubmitted with the same checkpoint URI and resumes from that checkpoint.
"""
import json

import pytest

from emulator import failures as scenarios
from emulator import scenario
from launcher.retry import ATTEMPT_TAG, RETRY_OF_TAG
from tests.aws_setup import BUCKET, create_world
from tests.conftest import JOBS

QUICK = dict(starting=0.1, downloading=0.05, training=0.4, uploading=0.05, line_interval=0.1, decoy=False)


@pytest.fixture
def world(server_cli):
    create_world(server_cli.session)
    yield server_cli.session, server_cli.cli
    scenario.forget_all()


def _tags(sm, name):
    arn = sm.describe_training_job(TrainingJobName=name)["TrainingJobArn"]
    return {t["Key"]: t["Value"] for t in sm.list_tags(ResourceArn=arn)["Tags"]}


def test_a_capacity_failure_is_retried_to_success(world):
    session, cli = world
    scenario.expect_attempts("llama2-7b-", [scenarios.capacity_failure(**QUICK), dict(QUICK)])
    out = cli("submit", "jobs/llama7b.yaml", "--set", "role=Good", "--retry", "capacity", "--max-attempts", "3",
              "--retry-backoff", "0", "--interval", "0.1", "--output", "json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    first, second = (a["job_name"] for a in result["attempts"])
    assert second == f"{first}-r2" and result["job_name"] == second and result["status"] == "Completed"
    assert [(a["status"], a["failure_class"]) for a in result["attempts"]] == [("Failed", "capacity"),
                                                                             ("Completed", None)]
    sm = session.client("sagemaker")
    assert sm.describe_training_job(TrainingJobName=first)["FailureReason"].startswith("CapacityError")
    tags = _tags(sm, second)
    assert tags[RETRY_OF_TAG] == first and tags[ATTEMPT_TAG] == "2" and tags["smp-launch:managed"] == "true"
    assert RETRY_OF_TAG not in _tags(sm, first)
    assert f"{first}: Failed [capacity]" in out.stderr and f"started {second}" in out.stderr


def test_a_spot_interruption_resumes_from_the_checkpoint(world):
    session, cli = world
    scenario.expect_attempts("llama2-7b-", [scenarios.spot_interrupted(
        interruptions=1, checkpoint_after=0.4, **{**QUICK, "interrupt_after": 0.8, "interrupted_for": 0.3,
                                                  "stopping": 0.3}),
                                            dict(QUICK)])
    out = cli("submit", "jobs/llama7b.yaml", "--set", "role=Good", "--set", "cluster.spot=true",
              "--retry", "spot", "--retry-backoff", "0", "--interval", "0.1", "--output", "json")
    assert out.returncode == 0, out.stderr
    first, second = (a["job_name"] for a in json.loads(out.stdout)["attempts"])
    sm = session.client("sagemaker")
    one, two = (sm.describe_training_job(TrainingJobName=n) for n in (first, second))
    assert (one["TrainingJobStatus"], one["SecondaryStatus"]) == ("Stopped", "MaxWaitTimeExceeded")
    assert "Interrupted" in [t["Status"] for t in one["SecondaryStatusTransitions"]]
    assert two["EnableManagedSpotTraining"] is True
    uri = one["CheckpointConfig"]["S3Uri"]
    assert two["CheckpointConfig"]["S3Uri"] == uri and uri.endswith(f"/checkpoints/{first}")
    # What the first job saved is in S3 under that URI, and it is what the second job found when it started.
    saved, restored = scenario.get(first).saved, scenario.get(second).restored
    assert saved and restored == saved
    prefix = uri[len(f"s3://{BUCKET}/"):]
    keys = {o["Key"] for o in session.client("s3").list_objects_v2(Bucket=BUCKET, Prefix=prefix)["Contents"]}
    assert keys == {f"{prefix}/{k}" for k in saved}
    logs = cli("logs", second, "--no-follow", "--host", "1")
    assert "resuming from checkpoint step_00000010" in logs.stdout, logs.stdout + logs.stderr


def test_an_out_of_memory_remedy_comes_from_the_jobs_own_plan(world):
    """`wait` reads algo-1's log tail (the OOM) and the plan.json in the job's source tarball (the layout).

    The job is started through the library (what the CLI's submit is a shell over, tested end to end in
    test_e2e_submit.py), which records it as `latest` in this test's state folder; `wait latest` is the CLI."""
    import os

    from launcher import api

    session, cli = world
    scenario.expect_attempts("llama2-7b-", [scenarios.out_of_memory(**QUICK)])
    started = api.submit(api.build_plan(api.load_spec(str(JOBS / "llama7b.yaml"), ["role=Good"])))
    assert started.job_name and started.remembered
    out = cli("wait", "latest", "--interval", "0.1", "--output", "json",
              extra_env={"XDG_STATE_HOME": os.environ["XDG_STATE_HOME"]})
    assert out.returncode == 1, out.stderr
    (row,) = json.loads(out.stdout)
    assert row["failure_class"] == "out_of_memory"
    assert "smp.tensor_parallel_degree: 2" in row["remedy"] and "29.7 of 40 GB" in row["remedy"], row["remedy"]
