"""End to end: the installed `smp-launch` as a subprocess against a moto server on 127.0.0.1."""
import io
import json
import tarfile

import pytest

import emulator
from launcher.plan.build import build_plan
from launcher.spec import load_spec
from tests.aws_setup import BUCKET
from tests.conftest import JOBS


def test_submit_starts_the_job_the_plan_describes_and_a_repeat_does_not_upload_again(server_world):
    """One world, two JSON submits: the first starts the job its plan describes and uploads the source; the
    second (same spec, same source) starts a job without uploading again."""
    session, arns, cli = server_world.session, server_world.arns, server_world.cli
    out = cli("submit", "jobs/llama7b.yaml", "--set", "role=Good", "--output", "json")
    assert out.returncode == 0, out.stderr
    first = json.loads(out.stdout)
    job = session.client("sagemaker").describe_training_job(TrainingJobName=first["job_name"])
    assert "smdistributed-modelparallel" in job["AlgorithmSpecification"]["TrainingImage"]
    assert job["ResourceConfig"]["InstanceType"] == "ml.p4d.24xlarge" and job["ResourceConfig"]["InstanceCount"] == 1
    assert json.loads(job["HyperParameters"]["mp_parameters"])["hybrid_shard_degree"] == 8
    assert job["RoleArn"] == arns["Good"]
    bucket, key = first["source_uri"][5:].split("/", 1)
    body = session.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(body)) as tar:
        script = tar.extractfile("train.py").read().decode()
    assert script == build_plan(load_spec(JOBS / "llama7b.yaml", ["role=Good"])).source.files["train.py"]
    assert "sagemaker.config" not in out.stdout + out.stderr
    assert "Deprecation" not in out.stderr and "telemetry" not in out.stderr.lower()

    second = json.loads(cli("submit", "jobs/llama7b.yaml", "--set", "role=Good", "--output", "json").stdout)
    assert first["uploaded"] and not second["uploaded"], "a repeated submit uploaded the same source again"
    assert "s3.PutObject" in first["aws_calls"] and "s3.PutObject" not in second["aws_calls"]
    print("first submit:", first["aws_calls"])
    print("repeated submit:", second["aws_calls"])


@pytest.mark.parametrize("role,code,text", [("Good", 0, "pass"), ("NoTrust", 3, "trust policy"),
                                            ("NoPerms", 3, "missing ecr:BatchGetImage")])
def test_check_role(server_world, role, code, text):
    cli = server_world.cli
    out = cli("check-role", "jobs/llama7b.yaml", "--set", f"role={role}")
    assert out.returncode == code, out.stderr
    assert text in out.stdout + out.stderr


def test_a_refused_role_creates_nothing(server_world):
    session, cli = server_world.session, server_world.cli
    out = cli("submit", "jobs/llama7b.yaml", "--set", "role=NoPerms")
    assert out.returncode == 3 and "missing" in out.stderr
    assert session.client("sagemaker").list_training_jobs()["TrainingJobSummaries"] == []
    assert "Contents" not in session.client("s3").list_objects_v2(Bucket=BUCKET)


def test_dry_run_creates_nothing(server_world):
    session, cli = server_world.session, server_world.cli
    out = cli("submit", "jobs/llama7b.yaml", "--dry-run", extra_env={"SMP_LAUNCH_ROLE": "Good"})
    assert out.returncode == 0, out.stderr and "nothing was written" in out.stdout
    assert session.client("sagemaker").list_training_jobs()["TrainingJobSummaries"] == []


def test_no_credentials_is_one_actionable_line(server_world, tmp_path):
    cli = server_world.cli
    out = cli("submit", "jobs/llama7b.yaml", "--set", "role=Good", extra_env={
        "AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": "",
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"), "AWS_CONFIG_FILE": str(tmp_path / "none")})
    assert out.returncode == 4
    assert out.stderr.strip().splitlines()[-1].startswith("no AWS credentials found")
    assert "Traceback" not in out.stderr


def test_text_output_names_the_job_console_and_next_command_and_wait_follows_the_job_to_its_end(server_world):
    """`submit --wait` in text: the lines every text submit prints (job, console URL, next command), then the
    job's log lines until it ends."""
    cli = server_world.cli
    fast = ["--interval", "0.2"]  # poll every 0.2 s, not every 5 s (the default)
    emulator.set_default({"starting": 0.2, "downloading": 0.1, "training": 0.6, "uploading": 0.1,
                          "line_interval": 0.15, "decoy": False})
    try:
        out = cli("submit", "jobs/llama7b.yaml", "--set", "role=Good", "--wait", *fast)
    finally:
        emulator.set_default(None)
    assert out.returncode == 0, out.stderr
    assert "started llama2-7b-" in out.stdout and "console.aws.amazon.com/sagemaker" in out.stdout
    assert "smp-launch logs llama2-7b-" in out.stdout
    assert "[algo-1]" in out.stdout
    assert "Completed" in out.stdout + out.stderr


def test_an_input_channel_with_no_objects_is_refused_and_the_dry_run_lists_each_channel(server_world):
    """CreateTrainingJob refuses a channel whose prefix holds nothing; the CLI says so first, exit 3, naming the
    channel and its prefix, writing nothing. With an object there, the dry run lists the channel (one call)."""
    session, cli = server_world.session, server_world.cli
    args = ("submit", "jobs/llama7b.yaml", "--set", "role=Good", "--set", f"data.train=s3://{BUCKET}/tokens/")
    out = cli(*args, "--dry-run")
    assert out.returncode == 3, out.stderr
    assert f"input channel 'train' (data.train) has no S3 objects under s3://{BUCKET}/tokens/" in out.stderr
    assert f"bucket {BUCKET}, prefix tokens/" in out.stderr and "Traceback" not in out.stderr
    out = cli(*args)
    assert out.returncode == 3, out.stderr
    assert session.client("sagemaker").list_training_jobs()["TrainingJobSummaries"] == []
    assert "Contents" not in session.client("s3").list_objects_v2(Bucket=BUCKET)

    session.client("s3").put_object(Bucket=BUCKET, Key="tokens/part-0.npy", Body=b"\x93NUMPY")
    out = cli(*args, "--dry-run", "--output", "json")
    assert out.returncode == 0, out.stderr
    calls = json.loads(out.stdout)["aws_calls"]
    assert calls.count("s3.ListObjectsV2") == 1 and "sagemaker.CreateTrainingJob" not in calls
