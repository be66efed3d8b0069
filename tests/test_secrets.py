"""Secrets: redacted in every plan, output and file; the real value reaches only CreateTrainingJob;
Secrets Manager ARNs fetched at job start, checked in the role check."""
import importlib.util
import io
import json
import os
import sys
import tarfile
from datetime import datetime, timezone

import boto3
import pytest

from launcher import api
from launcher.core.aws import Clients
from launcher.core.errors import SpecError
from launcher.plan.build import build_plan
from launcher.render.files import write_source_dir
from launcher.spec import load_spec
from launcher.spec.secrets import REDACTED, looks_secret
from launcher.submission.create import submit as submit_plan
from launcher.submission.role import required_permissions
from tests.conftest import JOBS


def submit(loaded, clients, *, now=None, **kw):
    """What `smp-launch submit` does: the plan for the clients' region, then submit that plan."""
    plan = api.build_plan(loaded, region=clients.region, profile=clients.profile, env=clients.env, now=now)
    return submit_plan(plan, clients, **kw)

NOW = datetime(2026, 11, 30, 10, 0, 0, tzinfo=timezone.utc)
VALUE = "hf_ThisIsTheRealToken1234567890"
ARN = "arn:aws:secretsmanager:us-west-2:123456789012:secret:wandb-key-AbCdEf"


@pytest.mark.parametrize("name", ["HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "WANDB_API_KEY", "DB_PASSWORD",
                                  "AWS_SECRET_ACCESS_KEY", "hfToken", "GITHUB_PAT", "OPENAI_APIKEY", "SSH_KEY",
                                  "KEY", "MY_CREDENTIALS", "passphrase"])
def test_names_that_look_secret(name):
    assert looks_secret(name)


@pytest.mark.parametrize("name", ["NCCL_DEBUG", "TOKENIZERS_PARALLELISM", "KMS_KEY_ID", "SSE_KMS_KEY", "KMS_KEY",
                                  "KEY_PREFIX", "MAX_TOKENS_PER_BATCH", "PATH", "SECRETARY_NAME", "KEYBOARD"])
def test_names_that_do_not(name):
    assert not looks_secret(name)


def secret_spec(monkeypatch, *more):
    monkeypatch.setenv("HF_TOKEN", VALUE)
    return load_spec(JOBS / "llama7b.yaml", ["role=Good", "environment.HF_TOKEN=${HF_TOKEN}",
                                             "environment.TOKENIZERS_PARALLELISM='false'", *more])


def test_plan_json_shows_the_secret_redacted(monkeypatch, run_cli):
    monkeypatch.setenv("HF_TOKEN", VALUE)
    r = run_cli("plan", "jobs/llama7b.yaml", "--set", "environment.HF_TOKEN=${HF_TOKEN}", "--output", "json")
    assert r.code == 0 and VALUE not in r.out + r.err
    data = json.loads(r.out)
    assert data["estimator"]["environment"]["HF_TOKEN"] == REDACTED
    assert data["request"]["Environment"]["HF_TOKEN"] == REDACTED
    assert data["estimator"]["environment"]["NCCL_DEBUG"] == "WARN"


def test_rendered_files_hold_no_secret(monkeypatch, tmp_path):
    loaded = secret_spec(monkeypatch)
    files = build_plan(loaded).source.files
    assert not [name for name, text in files.items() if VALUE in text]
    assert json.loads(files["plan.json"])["estimator"]["environment"] == {
        "NCCL_DEBUG": "WARN", "HF_TOKEN": REDACTED, "TOKENIZERS_PARALLELISM": "false"}
    write_source_dir(files, tmp_path)
    assert not [p for p in tmp_path.iterdir() if VALUE in p.read_text()]


def test_the_spec_hash_tag_does_not_depend_on_the_secret(monkeypatch):
    first = build_plan(secret_spec(monkeypatch))
    monkeypatch.setenv("HF_TOKEN", "another-value")
    again = build_plan(load_spec(JOBS / "llama7b.yaml", ["role=Good", "environment.HF_TOKEN=${HF_TOKEN}",
                                                         "environment.TOKENIZERS_PARALLELISM='false'"]))
    assert first.spec_hash == again.spec_hash


def test_submit_sends_the_value_to_sagemaker_and_nowhere_else(moto_world, monkeypatch):
    loaded = secret_spec(monkeypatch)
    clients = Clients()
    sent = {}
    clients.session.events.register("provide-client-params.sagemaker.CreateTrainingJob",
                                    lambda params, **_: sent.update(params))
    result = submit(loaded, clients, now=NOW)
    assert sent["Environment"]["HF_TOKEN"] == VALUE  # the job gets it
    assert VALUE not in json.dumps(result.to_dict(), default=str)
    assert result.request["Environment"]["HF_TOKEN"] == REDACTED
    bucket, key = result.source_uri[5:].split("/", 1)
    body = moto_world.session.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(body)) as tar:
        for member in tar.getmembers():
            assert VALUE.encode() not in tar.extractfile(member).read(), member.name


def test_secrets_manager_arns_are_validated(monkeypatch):
    for bad in ("arn:aws:s3:::bucket/key", "wandb-key", ARN + "\n", ARN.replace("123456789012", "12345")):
        with pytest.raises(SpecError) as err:
            load_spec(JOBS / "llama7b.yaml", [f"secrets.WANDB_API_KEY={json.dumps(bad)}"])
        assert "secrets.WANDB_API_KEY" in str(err.value) and "is not a Secrets Manager secret ARN" in str(err.value)
    with pytest.raises(SpecError, match="set both in environment and in secrets"):
        load_spec(JOBS / "llama7b.yaml", [f"secrets.NCCL_DEBUG={ARN}"])


def test_the_role_check_asks_for_get_secret_value_on_each_arn():
    plan = build_plan(load_spec(JOBS / "llama7b.yaml", ["role=Good", f"secrets.WANDB_API_KEY={ARN}"]))
    needs = dict(required_permissions(plan, "123456789012"))
    assert needs[ARN] == ("secretsmanager:GetSecretValue",)
    assert ARN not in dict(required_permissions(build_plan(load_spec(JOBS / "llama7b.yaml", ["role=Good"])), "1"))


def test_a_role_without_get_secret_value_fails_the_check(moto_world):
    from launcher.submission.role import RoleVerdict, check_role

    plan = build_plan(load_spec(JOBS / "llama7b.yaml", ["role=Good", f"secrets.WANDB_API_KEY={ARN}"]))
    check = check_role(plan, boto3.client("iam"), boto3.client("sts"))
    assert check.verdict == RoleVerdict.FAIL
    assert {(m["action"], m["resource"]) for m in check.missing} == {("secretsmanager:GetSecretValue", ARN)}


def test_the_job_reads_its_secrets_at_start(moto_world, tmp_path, monkeypatch):
    sm = boto3.client("secretsmanager", region_name="us-west-2")
    arn = sm.create_secret(Name="wandb-key", SecretString="wandb-real-value")["ARN"]
    loaded = load_spec(JOBS / "llama7b.yaml", [f"secrets.WANDB_API_KEY={arn}"])
    files = build_plan(loaded).source.files
    assert arn in files["train_secrets.py"] and "train_secrets.load()" in files["train.py"]
    write_source_dir(files, tmp_path)
    spec = importlib.util.spec_from_file_location("train_secrets_under_test", tmp_path / "train_secrets.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    module.load()
    assert os.environ["WANDB_API_KEY"] == "wandb-real-value"
    monkeypatch.setenv("WANDB_API_KEY", "set-by-hand")  # a local run's own value is kept
    module.load()
    assert os.environ["WANDB_API_KEY"] == "set-by-hand"
    sys.modules.pop("train_secrets_under_test", None)
