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


def test_the_package_exports_exactly_what_the_api_exports():
    from launcher import api

    assert launcher.__all__ == ["__version__", *api.__all__]
    assert len(set(api.__all__)) == len(api.__all__)
    assert set(launcher.__all__) <= set(dir(launcher))  # a REPL completes the names not loaded yet
    assert set(api.__all__) <= set(dir(api))
    for name in api.__all__:
        assert getattr(launcher, name) is getattr(api, name), name
    assert set(api._REEXPORTED) <= set(api.__all__)  # every type re-exported is public
    import importlib

    for package in ("render", "rules", "plan", "spec", "jobs"):  # a subpackage named as a public name replaces it
        importlib.import_module(f"launcher.{package}")
    assert all(getattr(launcher, name) is getattr(api, name) for name in api.__all__)
    with pytest.raises(AttributeError, match="^module 'launcher' has no attribute 'job_status'$"):
        launcher.job_status  # an internal function is not part of the face  # noqa: B018
    with pytest.raises(AttributeError, match="^module 'launcher' has no attribute 'Mapping'$"):
        launcher.Mapping  # nor is a name the API module happens to import  # noqa: B018


def test_every_api_function_is_in_the_api_doc():
    from launcher import api

    documented = API_DOC.read_text()
    functions = [n for n in api.__all__ if n not in api._REEXPORTED and callable(getattr(api, n))]
    assert len(functions) >= 25
    assert [n for n in functions if f"`{n}(" not in documented] == []


def test_importing_the_api_module_imports_no_sdk():
    code = ("import sys, launcher.api;"
            "print([m for m in ('boto3', 'botocore', 'pydantic', 'sagemaker', 'jinja2') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert out.stdout.split() == ["[]"], out.stderr


def test_check_role_gives_a_verdict_and_keeps_to_the_plans_region(moto_world):
    from launcher.core.aws import Clients

    good = launcher.build_plan(launcher.load_spec(str(REPO / "jobs/llama7b.yaml"), ["role=Good"]))
    check = launcher.check_role(good, clients=Clients(region="us-west-2"))
    assert isinstance(check, launcher.RoleCheck) and check.verdict == "pass" and check.checked > 0
    bare = launcher.build_plan(launcher.load_spec(str(REPO / "jobs/llama7b.yaml"), ["role=NoPerms"]))
    refused = launcher.check_role(bare, clients=Clients(region="us-west-2"))
    assert refused.verdict == "fail" and refused.missing  # a refusal is a result, not an exception
    with pytest.raises(launcher.UsageError, match="the plan is for us-west-2 but the clients are for eu-west-1"):
        launcher.check_role(good, clients=Clients(region="eu-west-1"))
    nobody = launcher.build_plan(launcher.load_spec(str(REPO / "jobs/llama7b.yaml")))
    with pytest.raises(launcher.UsageError, match="^no IAM role: set `role:` in the spec or export SMP_LAUNCH_ROLE"):
        launcher.check_role(nobody, clients=Clients(region="us-west-2"))  # no role to check is not a verdict


def test_check_role_without_credentials_raises_one_sentence_naming_the_step(moto_world):
    from botocore.exceptions import NoCredentialsError

    from launcher.core.aws import AwsError, Clients

    class NoCredentials:
        def __getattr__(self, operation):
            def call(**_):
                raise NoCredentialsError()
            return call

    good = launcher.build_plan(launcher.load_spec(str(REPO / "jobs/llama7b.yaml"), ["role=Good"]))
    clients = Clients(overrides={"iam": NoCredentials(), "sts": NoCredentials()}, region="us-west-2")
    with pytest.raises(AwsError, match="^checking the role: no AWS credentials found") as err:
        launcher.check_role(good, clients=clients)  # not a verdict: nothing could be asked
    assert err.value.exit_code == 4


def test_build_plan_decides_the_region_once(monkeypatch):
    loaded = launcher.load_spec(str(REPO / "jobs/llama7b.yaml"), ["role=Good"])
    assert loaded.spec.cluster.region == "us-west-2"
    assert launcher.build_plan(loaded).region == "us-west-2"  # the spec's
    assert launcher.build_plan(loaded, region="eu-west-1").region == "eu-west-1"  # an argument wins
    unset = launcher.load_spec(str(REPO / "jobs/llama7b.yaml"), ["role=Good", "cluster.region=null"])
    assert launcher.build_plan(unset, env={"AWS_REGION": "ap-south-1"}).region == "ap-south-1"
    monkeypatch.setenv("AWS_DEFAULT_REGION", "ca-central-1")
    monkeypatch.delenv("AWS_REGION", raising=False)
    assert launcher.build_plan(unset).region == "ca-central-1"
    assert launcher.build_plan(loaded).region == "us-west-2"  # the spec's region before the environment's
    assert launcher.resolve_region() == "ca-central-1" and launcher.resolve_region("sa-east-1") == "sa-east-1"
    assert launcher.connect().region is None  # clients made for no plan: the region is left to the plan


def test_a_bad_dict_override_names_the_argument_not_a_flag(write_spec):
    path = write_spec("name: demo\nmodel: {preset: llama2-7b}\noutput: {path: s3://my-bucket/smp}\n")
    with pytest.raises(launcher.SpecError) as err:
        launcher.load_spec(str(path), {"cluster.instance_count": 2, "training.batch_size": "many"})
    (problem,) = err.value.problems
    assert (problem.file, problem.line, problem.path) == ("overrides", 2, "training.batch_size")
    assert "--set" not in str(err.value) and str(err.value).startswith("overrides:2:")


def test_advise_names_its_arguments_and_the_cli_its_flags(run_cli):
    with pytest.raises(launcher.ArgumentError) as err:
        launcher.advise("no-such-model", instances=2)
    assert err.value.arguments == ("model",) and str(err.value).startswith("model: unknown preset")
    assert "--" not in str(err.value)
    with pytest.raises(launcher.ArgumentError, match=r"^give instances, or global_batch_tokens "):
        launcher.advise("llama2-7b")
    assert launcher.advise("llama2-7b", global_batch_tokens="4M")  # text is parsed as the CLI's flag is
    r = run_cli("advise", "--model", "no-such-model", "--instances", "2")
    assert r.code == 2 and r.err.startswith("--model: unknown preset")
    r = run_cli("advise", "--model", "llama2-7b")
    assert r.code == 2 and "give --instances, or --global-batch-tokens" in r.err


def test_advise_refuses_a_token_budget_under_one_token(run_cli):
    for tokens in (0, -5, "0", "0.0001"):  # "0.0001" is 0 once rounded to whole tokens
        with pytest.raises(launcher.ArgumentError) as err:
            launcher.advise("llama2-7b", instances=1, tokens=tokens)
        assert err.value.arguments == ("tokens",) and str(err.value) == "tokens: a token budget is at least 1"
    for text in ("0", "0.0001"):
        r = run_cli("advise", "--model", "llama2-7b", "--instances", "1", "--tokens", text)
        assert r.code == 2 and r.out == "" and r.err == "--tokens: a token budget is at least 1\n"


def test_write_source_dir_writes_the_plans_files(tmp_path):
    plan = launcher.build_plan(launcher.load_spec(str(REPO / "jobs/llama7b.yaml"), ["role=Good"]))
    paths = launcher.write_source_dir(plan, tmp_path / "src")
    assert sorted(p.name for p in paths) == sorted(plan.source.files)
    assert all(p.read_text() == plan.source.files[p.name] for p in paths)
    assert launcher.advisor_errors(plan) == []
    assert {r["id"] for r in launcher.advisor_rules()} and "| id | severity |" in launcher.advisor_rules_markdown()
    assert '"$schema"' in launcher.schema_text() or '"title"' in launcher.schema_text()
