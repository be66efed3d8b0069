"""`rerun` and `diff`: a job's plan read back from its own source tarball (plan.json, spec.json) in moto."""
import dataclasses
import io
import json
import tarfile
import types

import pytest

from launcher import api
from launcher.core.aws import Clients
from launcher.core.errors import LauncherError, UsageError
from launcher.core.names import RERUN_TAG
from launcher.jobs.stored import read_files
from launcher.orchestrate.provenance import (
    NotLaunchedHere,
    StoredJob,
    _environment,
    compare,
    flatten,
    stored_job,
)
from launcher.plan.build import build_plan
from launcher.render.source import tarball
from launcher.spec import load_spec
from launcher.spec.models import JobSpec
from tests.aws_setup import BUCKET
from tests.conftest import JOBS

SECRET_ARN = "arn:aws:secretsmanager:us-west-2:123456789012:secret:hf-AbCdEf"
TP2 = ["smp.tensor_parallel_degree=2", "smp.hybrid_shard_degree=4"]


@pytest.fixture
def recorded_world(moto_world):
    """conftest's `moto_world`, plus `clients()`: clients that record every CreateTrainingJob request in `sent`."""
    moto_world.sent = []
    moto_world.clients = lambda: _recording(moto_world.sent)
    return moto_world


def _recording(sent):
    clients = Clients(region="us-west-2")
    clients.session.events.register("provide-client-params.sagemaker.CreateTrainingJob",
                                    lambda params, **_: sent.append(json.loads(json.dumps(params))))
    return clients


def launch(recorded_world, *overrides):
    clients = recorded_world.clients()
    loaded = load_spec(JOBS / "llama7b.yaml", ["role=Good", *overrides])
    return api.submit(api.build_plan(loaded, region=clients.region, profile=clients.profile), clients=clients)


def test_the_tarball_stores_the_validated_spec_and_no_secret(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_the-secret-value")
    loaded = load_spec(JOBS / "llama7b.yaml", ["role=Good", "environment.HF_TOKEN=${HF_TOKEN}",
                                                f"secrets.HF_HUB_TOKEN={SECRET_ARN}"])
    assert loaded.spec.environment["HF_TOKEN"] == "hf_the-secret-value"  # the control: the value is in the spec
    plan = build_plan(loaded, region="us-west-2")
    files = plan.source.files
    stored = json.loads(files["spec.json"])
    assert stored["environment"]["HF_TOKEN"] == "<redacted>" and stored["secrets"] == {"HF_HUB_TOKEN": SECRET_ARN}
    assert not any("hf_the-secret-value" in text for text in files.values())
    assert "hf_the-secret-value" not in plan.source.tarball.decode("latin-1")
    # the stored spec is the validated spec: it validates back to the same thing (the secret aside)
    again = JobSpec.model_validate({**stored, "environment": dict(loaded.spec.environment)})
    assert again == loaded.spec
    # and sets the same fields (rules read what a spec set explicitly, e.g. SMP029 and SMP056)
    assert again.model_dump(exclude_unset=True) == loaded.spec.model_dump(exclude_unset=True)
    assert "activation_loading_horizon" not in stored.get("smp", {})  # a default, not stored


def test_rerun_submits_the_stored_plan_under_a_new_name(recorded_world):
    first = launch(recorded_world, *TP2)
    second = api.rerun(first.job_name, clients=recorded_world.clients())
    assert second.job_name != first.job_name and second.job_name.startswith("llama2-7b-")
    assert second.source_uri == first.source_uri and not second.uploaded  # the job's own tarball
    assert second.warnings == ()  # this smp-launch renders the stored spec to the very same files
    assert "sagemaker.CreateTrainingJob" in second.aws_calls and "iam.SimulatePrincipalPolicy" in second.aws_calls
    old, new = recorded_world.sent
    assert new["TrainingJobName"] == second.job_name
    tags = {t["Key"]: t["Value"] for t in new["Tags"]}
    assert tags[RERUN_TAG] == first.job_name
    # Everything else is the first job's request, but what names the job (its checkpoint folder too).
    for request, name in ((old, first.job_name), (new, second.job_name)):
        request.pop("TrainingJobName")
        request["Tags"] = [t for t in request["Tags"] if t["Key"] != RERUN_TAG]
        request["HyperParameters"].pop("sagemaker_job_name")
        assert request["CheckpointConfig"]["S3Uri"].endswith("/" + name)
        request["CheckpointConfig"].pop("S3Uri")
    assert new == old
    assert json.loads(new["HyperParameters"]["mp_parameters"])["tensor_parallel_degree"] == 2


def test_rerun_resume_keeps_the_jobs_checkpoint_uri_so_it_carries_on_from_it(recorded_world):
    """`rerun --resume` (what a job stopped at its max_run is told to do): the new job's CheckpointConfig is the old
    job's, which SageMaker copies back into /opt/ml/checkpoints; without --resume the rerun has its own."""
    first = launch(recorded_world)
    resumed = api.rerun(first.job_name, clients=recorded_world.clients(), resume=True)
    old, new = recorded_world.sent
    assert new["TrainingJobName"] == resumed.job_name != first.job_name
    assert new["CheckpointConfig"] == old["CheckpointConfig"]
    assert old["CheckpointConfig"]["S3Uri"].endswith("/" + first.job_name)
    fresh = api.rerun(first.job_name, dry_run=True, clients=recorded_world.clients())
    assert fresh.request["CheckpointConfig"]["S3Uri"].endswith("/" + fresh.job_name)


def test_rerun_resume_of_a_job_with_no_checkpoint_uri_is_refused(recorded_world, monkeypatch):
    from launcher.orchestrate import provenance

    first = launch(recorded_world)
    stored = provenance.stored_job(recorded_world.clients(), first.job_name)
    bare = dataclasses.replace(stored, description={k: v for k, v in stored.description.items()
                                                    if k != "CheckpointConfig"},
                               plan={k: v for k, v in stored.plan.items() if k != "estimator"})
    with pytest.raises(UsageError, match="names no checkpoint S3 URI"):
        provenance.rerun_plan(bare, recorded_world.clients(), resume=True)


def test_a_role_from_the_environment_is_the_role_of_the_rerun(recorded_world, monkeypatch):
    monkeypatch.setenv("SMP_LAUNCH_ROLE", "Good")
    clients = recorded_world.clients()
    first = api.submit(api.build_plan(load_spec(JOBS / "llama7b.yaml"), region=clients.region), clients=clients)
    monkeypatch.setenv("SMP_LAUNCH_ROLE", "NoTrust")  # what the shell says now does not change the rerun
    second = api.rerun(first.job_name, clients=recorded_world.clients())
    assert second.warnings == () and second.request["RoleArn"] == recorded_world.arns["Good"]


def test_rerun_dry_run_starts_nothing(recorded_world):
    first = launch(recorded_world)
    result = api.rerun(first.job_name, dry_run=True, clients=recorded_world.clients())
    assert result.dry_run and len(recorded_world.sent) == 1
    names = [j["TrainingJobName"] for j in recorded_world.sagemaker.list_training_jobs()["TrainingJobSummaries"]]
    assert names == [first.job_name]
    assert {"Key": RERUN_TAG, "Value": first.job_name} in result.request["Tags"]


def test_a_job_smp_launch_did_not_start_is_one_line_and_exit_2(recorded_world, run_cli):
    recorded_world.sagemaker.create_training_job(
        TrainingJobName="foreign", RoleArn=recorded_world.arns["Good"],
        AlgorithmSpecification={"TrainingImage": "123.dkr.ecr.us-west-2.amazonaws.com/x:1",
                                "TrainingInputMode": "File"},
        OutputDataConfig={"S3OutputPath": f"s3://{BUCKET}/out"},
        ResourceConfig={"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 10},
        StoppingCondition={"MaxRuntimeInSeconds": 60})
    result = run_cli("rerun", "foreign", "--region", "us-west-2")
    assert result.code == 2 and result.out == ""
    assert result.err.strip().count("\n") == 0 and "was not launched by smp-launch" in result.err
    assert "Traceback" not in result.err


def test_a_source_without_plan_json_is_not_ours(recorded_world):
    first = launch(recorded_world)
    bucket, key = first.source_uri[5:].split("/", 1)
    recorded_world.session.client("s3").put_object(Bucket=bucket, Key=key, Body=tarball({"train.py": "print(1)\n"}))
    with pytest.raises(NotLaunchedHere, match="no plan.json"):
        stored_job(Clients(region="us-west-2"), first.job_name)


def test_an_oversized_or_malformed_stored_plan_is_refused_in_one_line(recorded_world):
    first = launch(recorded_world)
    bucket, key = first.source_uri[5:].split("/", 1)
    s3 = recorded_world.session.client("s3")
    cases = (("[1, 2]", "not a JSON object"), ("{", "not JSON"), (" " * (1024 * 1024 + 1), "larger than 1 MiB"))
    for body, why in cases:
        s3.put_object(Bucket=bucket, Key=key, Body=tarball({"plan.json": body}))
        with pytest.raises(NotLaunchedHere, match=why):
            stored_job(Clients(region="us-west-2"), first.job_name)


def test_a_job_stored_before_spec_json_cannot_be_rerun_but_can_be_diffed(recorded_world):
    first = launch(recorded_world)
    bucket, key = first.source_uri[5:].split("/", 1)
    s3 = recorded_world.session.client("s3")
    files = read_files(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    files.pop("spec.json")
    s3.put_object(Bucket=bucket, Key=key, Body=tarball(files))
    with pytest.raises(UsageError, match="older smp-launch"):
        api.rerun(first.job_name, clients=Clients(region="us-west-2"))
    assert api.diff(first.job_name, first.job_name, clients=Clients(region="us-west-2")) == []
    with pytest.raises(UsageError, match="did not store its spec; diff its plan instead"):
        api.diff(first.job_name, first.job_name, spec=True, clients=Clients(region="us-west-2"))


def _restore(recorded_world, job, **changes):
    """Put `job`'s source tarball back with some of its files changed (a name mapped to None drops it)."""
    bucket, key = job.source_uri[5:].split("/", 1)
    s3 = recorded_world.session.client("s3")
    files = read_files(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    for name, text in changes.items():
        if text is None:
            files.pop(name)
        else:
            files[name] = text
    s3.put_object(Bucket=bucket, Key=key, Body=tarball(files))
    return files


def test_a_stored_spec_this_version_cannot_validate_is_refused_for_rerun_and_diffed_as_stored(recorded_world):
    first = launch(recorded_world)
    stored = json.loads(_restore(recorded_world, first)["spec.json"])
    stored["smp"]["tensor_parallel_degree"] = "two"
    _restore(recorded_world, first, **{"spec.json": json.dumps(stored)})
    here = Clients(region="us-west-2")
    with pytest.raises(UsageError, match=f"^{first.job_name}'s stored spec does not validate with this smp-launch: "
                                         "Input should be a valid integer"):
        api.rerun(first.job_name, clients=here)
    changes = {c.path: (c.a, c.b) for c in api.diff(first.job_name, str(JOBS / "llama7b.yaml"), spec=True,
                                                      clients=here)}
    assert changes["smp.tensor_parallel_degree"] == ("two", 1)


def test_a_rerun_warns_when_this_version_renders_the_stored_spec_differently(recorded_world):
    first = launch(recorded_world)
    files = _restore(recorded_world, first)
    plan = json.loads(files["plan.json"])
    plan["spec_hash"] = "0123abcd"
    _restore(recorded_world, first, **{"train.py": files["train.py"] + b"# changed\n", "plan.json": json.dumps(plan)})
    again = api.rerun(first.job_name, dry_run=True, clients=recorded_world.clients())
    assert again.warnings[0] == (f"this smp-launch renders {first.job_name}'s spec differently (plan.json, train.py); "
                                 "the rerun runs the job's own source, as stored")
    assert again.warnings[1].startswith("the stored spec's hash (0123abcd) is not the one planned now (")


def test_a_job_whose_tags_cannot_be_read_is_still_rerun(recorded_world, monkeypatch):
    first = launch(recorded_world)
    clients = recorded_world.clients()

    def refused(**_kw):
        raise RuntimeError("AccessDenied: sagemaker:ListTags")

    monkeypatch.setattr(clients.sagemaker, "list_tags", refused)
    again = api.rerun(first.job_name, dry_run=True, clients=clients)
    assert {"Key": RERUN_TAG, "Value": first.job_name} in again.request["Tags"] and again.warnings == ()


def test_a_source_tarball_that_is_gone_is_one_line_naming_the_job_and_its_uri(recorded_world):
    first = launch(recorded_world)
    bucket, key = first.source_uri[5:].split("/", 1)
    recorded_world.session.client("s3").delete_object(Bucket=bucket, Key=key)
    with pytest.raises(LauncherError) as err:
        stored_job(Clients(region="us-west-2"), first.job_name)
    assert f"reading {first.job_name}'s source {first.source_uri}" in str(err.value) and "\n" not in str(err.value)


def test_a_source_that_trickles_past_its_deadline_is_the_read_error_not_a_job_smp_launch_did_not_start(
        recorded_world, monkeypatch):
    import time

    from launcher.core import aws
    from launcher.jobs import stored

    first = launch(recorded_world)
    clients = recorded_world.clients()
    real = clients.s3.get_object

    class Trickle:
        def read(self, _n):
            time.sleep(3)  # past the 1 s deadline below
            return b""

    monkeypatch.setattr(clients.s3, "get_object", lambda **kw: {**real(**kw), "Body": Trickle()})
    monkeypatch.setattr(stored, "read_body", lambda body, limit, *, what: aws.read_body(body, limit, what=what,
                                                                                           seconds=1.0))
    with pytest.raises(aws.AwsError) as err:
        stored_job(clients, first.job_name)
    assert str(err.value).startswith(f"{first.source_uri} gave no whole answer within 1 s")
    assert not isinstance(err.value, NotLaunchedHere)


def test_a_job_described_without_its_arn_is_rerun_without_reading_its_tags(recorded_world, monkeypatch):
    first = launch(recorded_world)
    clients = recorded_world.clients()
    real = clients.sagemaker.describe_training_job
    monkeypatch.setattr(clients.sagemaker, "describe_training_job",
                        lambda **kw: {k: v for k, v in real(**kw).items() if k != "TrainingJobArn"})
    monkeypatch.setattr(clients.sagemaker, "list_tags", lambda **_kw: pytest.fail("no ARN, no tags to list"))
    again = api.rerun(first.job_name, dry_run=True, clients=clients)
    assert {"Key": RERUN_TAG, "Value": first.job_name} in again.request["Tags"] and again.warnings == ()


def test_a_redacted_environment_value_comes_back_from_the_job_or_the_rerun_is_refused():
    spec = {"environment": {"HF_TOKEN": "<redacted>", "NCCL_DEBUG": "WARN"}}
    job = StoredJob("j", {"Environment": {"HF_TOKEN": "hf_x", "NCCL_DEBUG": "WARN"}}, "s3://b/k.tar.gz", b"", {},
                    {}, spec)
    assert _environment(job) == {"HF_TOKEN": "hf_x", "NCCL_DEBUG": "WARN"}
    moto_like = StoredJob("j", {}, "s3://b/k.tar.gz", b"", {}, {}, spec)  # moto returns no Environment
    with pytest.raises(UsageError, match="HF_TOKEN was redacted"):
        _environment(moto_like)


def test_rerun_of_a_job_with_a_secret_environment_value_in_moto_is_refused_clearly(recorded_world, monkeypatch,
                                                                                    run_cli):
    monkeypatch.setenv("HF_TOKEN", "hf_the-secret-value")
    first = launch(recorded_world, "environment.HF_TOKEN=${HF_TOKEN}")
    result = run_cli("rerun", first.job_name, "--region", "us-west-2")
    assert result.code == 2 and "HF_TOKEN was redacted" in result.err and "hf_the-secret-value" not in result.err


def test_diff_shows_what_changed_key_by_key(recorded_world, run_cli):
    a, b = launch(recorded_world), launch(recorded_world, *TP2)
    here = Clients(region="us-west-2")
    changes = {c.path: c for c in api.diff(a.job_name, b.job_name, clients=Clients(region="us-west-2"))}
    tp = changes["distribution.smdistributed.modelparallel.parameters.tensor_parallel_degree"]
    assert (tp.a, tp.b, tp.kind) == (1, 2, "changed")
    assert "spec_hash" not in changes and "estimator.tags[smp-launch:spec-hash]" not in changes
    everything = {c.path for c in api.diff(a.job_name, b.job_name, everything=True, clients=here)}
    assert {"spec_hash", "estimator.tags[smp-launch:spec-hash]"} <= everything

    specs = {c.path: (c.a, c.b) for c in api.diff(a.job_name, b.job_name, spec=True, clients=here)}
    assert specs == {"smp.tensor_parallel_degree": (1, 2), "smp.hybrid_shard_degree": (8, 4)}

    out = run_cli("diff", a.job_name, b.job_name, "--spec", "--region", "us-west-2")
    assert out.code == 0 and "  smp.tensor_parallel_degree: 1 -> 2" in out.out.splitlines()
    js = run_cli("diff", a.job_name, b.job_name, "--output", "json", "--region", "us-west-2")
    data = json.loads(js.out)
    assert {"path": tp.path, "a": 1, "b": 2, "kind": "changed"} in data
    assert run_cli("diff", a.job_name, b.job_name, "--exit-code", "--region", "us-west-2").code == 1
    assert run_cli("diff", a.job_name, a.job_name, "--exit-code", "--region", "us-west-2").code == 0


def test_diff_a_job_against_a_spec_file(recorded_world, run_cli):
    job = launch(recorded_world)
    same = api.diff(job.job_name, str(JOBS / "llama7b.yaml"), clients=Clients(region="us-west-2"))
    # the spec file's plan differs only in what the job was given on the command line (--set role=Good)
    assert sorted((c.path, c.a, c.b) for c in same) == [("estimator.role", "Good", None), ("role", "Good", None)]
    out = run_cli("diff", str(JOBS / "llama70b.yaml"), job.job_name, "--region", "us-west-2")
    assert out.code == 0 and "model.num_layers: 80 -> 32" in out.out


def test_flatten_keys_tags_by_key_and_objects_by_position():
    flat = flatten({"estimator": {"tags": [{"Key": "team", "Value": "nlp"}], "subnets": ["a", "b"]},
                    "advisories": [{"rule": "SMP001"}], "memory": None})
    assert flat == {"estimator.tags[team]": "nlp", "estimator.subnets": ["a", "b"],
                    "advisories[SMP001].rule": "SMP001", "memory": None}
    assert flatten({"channels": [{"uri": "s3://a"}, {"uri": "s3://b"}]}) == {"channels[0].uri": "s3://a",
                                                                              "channels[1].uri": "s3://b"}
    changes = compare({"x": {"y": 1}, "gone": 1}, {"x": {"y": 2}, "new": {"k": "v"}})
    assert [(c.path, c.a, c.b, c.kind) for c in changes] == [
        ("x.y", 1, 2, "changed"), ("gone", 1, None, "removed"), ("new.k", None, "v", "added")]


def test_an_object_left_whole_reads_with_its_keys_sorted_on_both_sides():
    # A tag list is known by its shape alone, so a stored plan may hold an object as a tag's value: it is one
    # leaf, shown with its keys in one order, so only the value that changed differs between the sides.
    a = {"tags": [{"Key": "owner", "Value": {"team": "nlp", "cost": 1}}]}
    b = {"tags": [{"Key": "owner", "Value": {"cost": 2, "team": "nlp"}}]}
    (change,) = compare(a, b)
    assert change.line() == '  tags[owner]: {"cost": 1, "team": "nlp"} -> {"cost": 2, "team": "nlp"}'
    assert [c.line() for c in compare({"gone": {"x": 1}}, {"new": {"k": "v"}})] == ['- gone.x: 1', '+ new.k: "v"']


def test_a_hostile_tarball_is_read_without_links_or_unbounded_size():
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        link = tarfile.TarInfo("plan.json")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
    assert read_files(raw.getvalue()) == {}
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        big = tarfile.TarInfo("plan.json")
        big.size = 65 * 1024 * 1024
        tar.addfile(big, io.BytesIO(b"\0" * big.size))
    with pytest.raises(ValueError, match="64 MiB"):
        read_files(raw.getvalue())


def test_a_tarball_larger_than_s3_said_is_refused_as_it_is_read(monkeypatch):
    from launcher.jobs import stored
    from launcher.jobs.stored import Unreadable, read_source

    monkeypatch.setattr(stored, "MAX_TARBALL", 1000)
    s3 = types.SimpleNamespace(get_object=lambda **_kw: {"ContentLength": 10, "Body": io.BytesIO(b"x" * 1001)})
    with pytest.raises(Unreadable, match="its source s3://b/k.tar.gz is larger than 64 MiB"):
        read_source(s3, "s3://b/k.tar.gz")
    long_uri = "s3://b/" + "k" * 300 + ".tar.gz"  # a hostile source URI is cut to 200 characters in the message
    with pytest.raises(Unreadable) as refused:
        read_source(s3, long_uri)
    assert str(refused.value) == f"its source {long_uri[:199]}… is larger than 64 MiB"


def test_diff_keeps_the_sdk_out():
    import subprocess
    import sys

    code = ("import sys, launcher.orchestrate.provenance, launcher.cli.provenance, launcher.cli.app;"
            "print(any(m.split('.')[0] == 'sagemaker' for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr


def test_diff_of_spec_files_needs_no_region_and_a_missing_file_is_said_so(run_cli, monkeypatch):
    for var in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(var, raising=False)
    r = run_cli("diff", str(JOBS / "llama70b.yaml"), str(JOBS / "llama7b.yaml"), "--spec")
    assert r.code == 0 and "cluster.instance_count: 32 -> 1" in r.out, r.err
    missing = run_cli("diff", "nosuch.yaml", str(JOBS / "llama7b.yaml"))
    assert missing.code == 2 and "cannot read nosuch.yaml" in missing.err and "region" not in missing.err


def test_one_reader_bounds_members_and_json_depth_for_rerun_and_failure_remedies(recorded_world):
    from launcher.jobs import failures, stored

    first = launch(recorded_world)
    bucket, key = first.source_uri[5:].split("/", 1)
    s3 = recorded_world.session.client("s3")
    here = Clients(region="us-west-2")
    description = here.sagemaker.describe_training_job(TrainingJobName=first.job_name)
    assert failures.job_plan(here, description) == stored_job(here, first.job_name).plan  # one reader, one answer
    deep = '{"a": ' * 100 + "1" + "}" * 100
    many = {f"f{i}.txt": "" for i in range(stored.MAX_MEMBERS)} | {"plan.json": "{}"}
    for files, why in (({"plan.json": deep}, "nests deeper than 64 levels"), (many, "more than 1000 members")):
        s3.put_object(Bucket=bucket, Key=key, Body=tarball(files))
        with pytest.raises(NotLaunchedHere, match=why):
            stored_job(here, first.job_name)
        assert failures.job_plan(here, description) is None
    shallow = '{"a": ' * 63 + "1" + "}" * 63  # 63 objects inside plan.json's own: 64 levels
    s3.put_object(Bucket=bucket, Key=key, Body=tarball({"plan.json": shallow}))
    assert stored_job(here, first.job_name).plan["a"]["a"]


def test_rerun_of_tags_out_of_alphabetical_order_renders_the_same_files(recorded_world):
    first = launch(recorded_world, "tags.zeta=z", "tags.alpha=a", "tags.mid=m")
    stored = stored_job(Clients(region="us-west-2"), first.job_name)
    assert list(stored.spec["tags"]) == ["alpha", "mid", "team", "zeta"]  # spec.json keeps its keys sorted
    second = api.rerun(first.job_name, dry_run=True, clients=recorded_world.clients())
    assert second.warnings == ()
    order = [t["Key"] for t in second.request["Tags"]][:4]
    assert order == ["team", "zeta", "alpha", "mid"]  # as the job had them: the spec's own, then --set's


def _spec(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(f"extends: {JOBS / 'llama7b.yaml'}\n{text}")
    return str(path)


def test_the_default_diff_shows_training_changes(tmp_path, run_cli, monkeypatch):
    monkeypatch.setenv("SMP_LAUNCH_ROLE", "Good")
    a = _spec(tmp_path, "a.yaml", "training:\n  max_steps: 100\n")
    b = _spec(tmp_path, "b.yaml", "training:\n  max_steps: 200\n")
    changes = {c.path: (c.a, c.b) for c in api.diff(a, b, clients=Clients(region="us-west-2"))}
    assert changes == {"spec_file": ("a.yaml", "b.yaml"), "training.max_steps": (100, 200)}
    out = run_cli("diff", a, b, "--region", "us-west-2")
    assert out.code == 0 and "  training.max_steps: 100 -> 200" in out.out.splitlines()


def test_the_default_diff_of_two_sweep_jobs_shows_their_batch_size(recorded_world):
    a, b = launch(recorded_world, "training.batch_size=1"), launch(recorded_world, "training.batch_size=2")
    changes = {c.path: (c.a, c.b) for c in api.diff(a.job_name, b.job_name, clients=Clients(region="us-west-2"))}
    assert changes["training.batch_size"] == (1, 2)


def test_one_more_advisory_is_one_change_not_a_shift():
    adv = [{"rule": f"SMP0{i}", "severity": "info", "message": f"m{i}", "field": f"f{i}"} for i in range(10, 15)]
    a, b = {"advisories": adv}, {"advisories": [{"rule": "SMP001", "severity": "warning", "message": "new",
                                                 "field": "x"}, *adv]}
    changes = compare(a, b)
    assert {c.path for c in changes} == {"advisories[SMP001].rule", "advisories[SMP001].severity",
                                         "advisories[SMP001].message", "advisories[SMP001].field"}
    assert all(c.kind == "added" for c in changes)
    # a rule that fires twice is told apart by its field
    twice = [{"rule": "SMP050", "field": "a", "message": "x"}, {"rule": "SMP050", "field": "b", "message": "y"}]
    assert set(flatten({"advisories": twice})) == {"advisories[SMP050@a].rule", "advisories[SMP050@a].field",
                                                   "advisories[SMP050@a].message", "advisories[SMP050@b].rule",
                                                   "advisories[SMP050@b].field", "advisories[SMP050@b].message"}


def test_a_stored_specs_long_validation_message_is_cut_to_200_characters(recorded_world):
    first = launch(recorded_world)
    stored = json.loads(_restore(recorded_world, first)["spec.json"])
    stored["secrets"] = {"WANDB_API_KEY": "x" * 300}  # its message quotes the value and says what to write: 241
    _restore(recorded_world, first, **{"spec.json": json.dumps(stored)})
    with pytest.raises(UsageError) as err:
        api.rerun(first.job_name, clients=Clients(region="us-west-2"))
    message = str(err.value).split("does not validate with this smp-launch: ", 1)[1]
    assert len(message) == 200 and message.endswith("…") and message.startswith("Value error, 'xxx")
