"""docs/api.md's pipeline example runs as written, against moto, so the documentation cannot rot;
and the public API's promises: cheap import, typed errors, nothing printed, warnings returned."""
import subprocess
import sys

import pytest

import launcher
from launcher.spec.loader import _display as shown
from tests.conftest import REPO
from tests.doc_blocks import blocks

API_DOC = REPO / "docs" / "api.md"


def test_the_pipeline_example_runs_against_moto(moto_world, clock, monkeypatch, capsys):
    import launcher.jobs.status

    monkeypatch.chdir(REPO)
    monkeypatch.setenv("SMP_LAUNCH_ROLE", "Good")  # the example takes the role from the environment
    monkeypatch.setattr(launcher.jobs.status.time, "sleep", clock.sleep)  # wait() polls on the virtual clock
    (example,) = [b.text for b in blocks(API_DOC) if b.lang == "python" and b.heading == "A pipeline step"]
    namespace: dict = {}
    exec(compile(example, str(API_DOC), "exec"), namespace)
    out = capsys.readouterr().out
    job, rehearsal, plan = namespace["job"], namespace["rehearsal"], namespace["plan"]
    assert rehearsal.dry_run and not rehearsal.uploaded and rehearsal.job_name == plan.job_name
    assert job.uploaded and job.job_name == plan.job_name and f"started {job.job_name}" in out
    assert plan.world_size == 16 and "16 GPUs" in out  # the override reached the plan
    described = moto_world.session.client("sagemaker").describe_training_job(TrainingJobName=job.job_name)
    assert described["RoleArn"] == moto_world.arns["Good"] == job.request["RoleArn"]
    assert plan.request["RoleArn"] == "<ARN of role Good>"  # the plan's prediction, resolved by submit only


def test_the_readme_points_at_the_api_doc():
    readme = (REPO / "README.md").read_text()
    assert "## Python API" in readme and "docs/api.md" in readme


def test_import_launcher_is_cheap_and_names_load_on_use():
    code = ("import sys, launcher;"
            "print([m for m in ('boto3', 'pydantic', 'sagemaker', 'jinja2') if m in sys.modules]);"
            "launcher.SpecError; launcher.Interrupted; launcher.Submission; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert out.stdout.split() == ["[]", "ok"], out.stderr


def test_spec_error_problems_are_typed(write_spec):
    path = write_spec("name: demo\nmodel: {preset: llama2-7b}\noutput: {path: s3://my-bucket/smp}\n"
                      "training: {batch_size: many}\n")
    with pytest.raises(launcher.SpecError) as err:
        launcher.load_spec(str(path))
    (problem,) = err.value.problems
    path = shown(path)  # as the loader names files: relative to the working directory when that is shorter
    assert (problem.file, problem.line, problem.path) == (path, 4, "training.batch_size")
    assert problem.column == problem.col == problem.mark.col > 1
    assert problem.to_dict() == {"file": path, "line": 4, "column": problem.column,
                                 "path": "training.batch_size", "message": problem.message}


def test_submit_prints_nothing_and_returns_its_warnings(moto_world, capsys):
    """The role check cannot tell (simulation denied): submit goes on, and says so in the result only."""
    import boto3

    from launcher.core.aws import Clients
    from tests.test_submit import DenySimulation

    plan = launcher.build_plan(launcher.load_spec(str(REPO / "jobs/llama7b.yaml"), ["role=Good"]))
    clients = Clients(region="us-west-2", overrides={"iam": DenySimulation(boto3.client("iam"))})
    result = launcher.submit(plan, dry_run=True, clients=clients)
    assert result.warnings and all("cannot tell" in w for w in result.warnings)
    assert result.to_dict()["warnings"] == list(result.warnings)
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""


def test_a_plan_for_one_region_refuses_clients_for_another(moto_world):
    from launcher.core.aws import Clients

    plan = launcher.build_plan(launcher.load_spec(str(REPO / "jobs/llama7b.yaml"), ["role=Good"]))
    with pytest.raises(launcher.UsageError) as err:
        launcher.submit(plan, dry_run=True, clients=Clients(region="eu-west-1"))
    assert "the plan is for us-west-2 but the clients are for eu-west-1" in str(err.value)
