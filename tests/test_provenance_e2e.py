"""End to end: `rerun`, `diff` and `pipeline` as the installed CLI runs them, against a moto server."""
import json

import pytest

from tests.conftest import JOBS
from tests.test_pipeline import PIPELINE_ROLE, pipeline_world


@pytest.fixture
def make_world():
    return pipeline_world  # conftest's `server_world` builds this account


def test_submit_rerun_diff(server_world):
    """The job to rerun is started through the library (the same submit the CLI's is a shell over; the CLI's
    own submit is tested end to end in test_e2e_submit.py): one SDK import fewer than a `submit` subprocess."""
    from launcher import api

    session, cli = server_world.session, server_world.cli
    first = api.submit(api.build_plan(api.load_spec(str(JOBS / "llama7b.yaml"), ["role=Good"]))).to_dict()
    assert first["job_name"] and first["uploaded"]
    out = cli("rerun", first["job_name"], "--output", "json")
    assert out.returncode == 0, out.stderr
    again = json.loads(out.stdout)
    assert again["rerun_of"] == first["job_name"] and again["job_name"] != first["job_name"]
    assert again["source_uri"] == first["source_uri"] and not again["uploaded"]
    sm = session.client("sagemaker")
    arn = sm.describe_training_job(TrainingJobName=again["job_name"])["TrainingJobArn"]
    assert {"Key": "smp-launch:rerun-of", "Value": first["job_name"]} in sm.list_tags(ResourceArn=arn)["Tags"]
    assert "sagemaker.config" not in out.stdout + out.stderr and "Deprecation" not in out.stderr

    same = cli("diff", first["job_name"], again["job_name"])
    assert same.returncode == 0 and same.stdout.startswith("no difference"), same.stdout + same.stderr
    text = cli("diff", first["job_name"], "jobs/llama70b.yaml", "--spec")
    assert text.returncode == 0 and "  model.preset: \"llama2-7b\" -> \"llama2-70b\"" in text.stdout.splitlines()


def test_pipeline_is_upserted_and_described_back(server_world):
    session, arns, cli = server_world.session, server_world.arns, server_world.cli
    specs = ("jobs/llama7b.yaml", "jobs/llama7b.yaml", "--name", "nightly", "--set", f"role={PIPELINE_ROLE}")
    dry = cli("pipeline", *specs, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    definition = json.loads(dry.stdout)
    out = cli("pipeline", *specs)
    assert out.returncode == 0, out.stderr
    assert "upserted pipeline nightly" in out.stdout and "llama2-7b -> llama2-7b-2" in out.stdout
    described = session.client("sagemaker").describe_pipeline(PipelineName="nightly")
    stored = json.loads(described["PipelineDefinition"])
    assert described["RoleArn"] == arns[PIPELINE_ROLE]
    assert [s["Name"] for s in stored["Steps"]] == [s["Name"] for s in definition["Steps"]]
    assert stored["Steps"][1]["DependsOn"] == ["llama2-7b"]
    assert "Traceback" not in out.stderr and "telemetry" not in out.stderr.lower()
