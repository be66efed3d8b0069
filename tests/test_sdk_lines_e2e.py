"""End to end on whichever SageMaker SDK line is installed (`make test` runs this module on 2.x and on 3.x): the
installed CLI submits the reference job to the emulator with each backend that line has, the emulator receives
exactly the request `plan` shows, and `logs`, `status` and `wait` follow the job to its end."""
import json

import pytest

import emulator
from emulator.sagemaker import received
from tests.conftest import BACKENDS, SDK_MAJOR

FAST = ["--interval", "0.2"]
LIFECYCLE = {"starting": 0.2, "downloading": 0.1, "training": 0.8, "uploading": 0.1,
             "line_interval": 0.15, "decoy": False}


@pytest.fixture
def quick_jobs():
    emulator.set_default(LIFECYCLE)
    yield
    emulator.set_default(None)


@pytest.mark.parametrize("kind", BACKENDS, ids=str)
def test_submit_with_each_backend_then_logs_status_and_wait_follow_the_job(server_world, quick_jobs, kind):
    cli, arns = server_world.cli, server_world.arns
    spec = ["jobs/llama7b.yaml", "--set", "role=Good", "--set", "cluster.instance_count=2", "--backend", str(kind)]
    planned = cli("plan", *spec, "--output", "json")
    assert planned.returncode == 0, planned.stderr
    plan = json.loads(planned.stdout)
    assert plan["backend"]["name"] == kind and plan["backend"]["problem"] is None

    out = cli("submit", *spec, "--output", "json")
    assert out.returncode == 0, out.stderr
    submitted = json.loads(out.stdout)
    name = submitted["job_name"]
    sent = received(name)
    assert sent == {**submitted["request"], "RoleArn": arns["Good"]}
    # the plan printed a moment earlier names another job (its own timestamp) and the role by name; all else agrees
    timeless = {k: v for k, v in plan["request"].items() if k not in ("TrainingJobName", "RoleArn", "CheckpointConfig",
                                                                       "InputDataConfig", "HyperParameters")}
    assert all(sent[k] == v for k, v in timeless.items()), [k for k, v in timeless.items() if sent[k] != v]
    if kind == "model-trainer":
        assert [c["ChannelName"] for c in sent["InputDataConfig"]] == ["code", "sm_drivers"]
        assert sent["AlgorithmSpecification"]["ContainerEntrypoint"] == ["/bin/bash"]
    else:
        assert json.loads(sent["HyperParameters"]["sagemaker_submit_directory"]) == submitted["source_uri"]
    assert "Traceback" not in out.stderr and "sagemaker.config" not in out.stdout + out.stderr

    logs = cli("logs", name, "--output", "json", *FAST)
    assert logs.returncode == 0, logs.stderr
    hosts = {json.loads(line).get("host") for line in logs.stdout.splitlines() if line.startswith("{")}
    assert {"algo-1", "algo-2"} <= hosts

    status = cli("status", name, "--output", "json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["status"] == "Completed"

    waited = cli("wait", name, *FAST)
    assert waited.returncode == 0, waited.stderr
    assert "Completed" in waited.stdout + waited.stderr


def test_a_backend_the_installed_sdk_lacks_is_refused_before_any_aws_call(server_world):
    """On SDK 3.x the Estimator does not exist: the plan says so and submit refuses with exit 2, nothing created."""
    if SDK_MAJOR == 2:
        pytest.skip("SDK 2.x has both backends")
    out = server_world.cli("submit", "jobs/llama7b.yaml", "--set", "role=Good", "--backend", "estimator")
    assert out.returncode == 2
    assert "SMP090" in out.stderr and "exists only in SageMaker SDK 2.x" in out.stderr
    assert server_world.session.client("sagemaker").list_training_jobs()["TrainingJobSummaries"] == []


def test_help_validate_plan_and_advise_import_neither_sdk_line():
    """The commands that make no AWS call stay fast on either line: neither SDK's packages are imported (about 2 s
    each), whichever backend the plan names, nor the other command groups' dependencies."""
    import subprocess
    import sys

    from tests.conftest import JOBS, REPO

    code = ("import sys; from launcher.cli import main\n"
            "spec = sys.argv[1]\n"
            "for args in (['--help'], ['status', '--help'], ['validate', spec], ['plan', spec],\n"
            "             ['plan', spec, '--backend', 'model-trainer'], ['plan', spec, '--output', 'json'],\n"
            "             ['advise', '--model', 'llama2-13b', '--instances', '2']):\n"
            "    try:\n        main(args)\n    except SystemExit:\n        pass\n"
            "heavy = ('sagemaker', 'sagemaker_core', 'mlflow', 'torch', 'pandas', 'moto')\n"
            "bad = [m for m in sys.modules if m.split('.')[0] in heavy]\n"
            "sys.stderr.write('IMPORTED ' + ','.join(sorted(bad)[:5]))")
    out = subprocess.run([sys.executable, "-c", code, str(JOBS / "llama7b.yaml")], cwd=REPO, capture_output=True,
                         text=True, timeout=120)
    assert out.stderr.strip().endswith("IMPORTED"), out.stderr[-500:]
