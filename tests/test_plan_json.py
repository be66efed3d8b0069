"""`plan.to_dict()` is `plan --output json`, a contract pipelines read: pinned key for key, value for value.

tests/fixtures/plan_json_pinned.json holds `plan --output json` (the plan's keys with its source URI and
predicted request) as written down once, so any change to a key or value is deliberate: it covers
the three example jobs and a variant with spot, KMS, a VPC, a role by name, a secret
environment value, a Secrets Manager secret, a validation channel, an image and tensor parallelism.
"""
import json
import re
from datetime import datetime, timezone

import pytest

from launcher.plan.build import build_plan
from launcher.spec import load_spec
from tests.conftest import REPO

PINNED = json.loads((REPO / "tests" / "fixtures" / "plan_json_pinned.json").read_text())
NOW = datetime(2026, 11, 30, 9, 15, 7, 123000, tzinfo=timezone.utc)
# No state folder: the pin holds the published calibration and the shipped price snapshot, not this machine's.
ENV = {"SMP_LAUNCH_BUCKET": "pinned-bucket", "XDG_STATE_HOME": "/nonexistent/smp-launch-pinned-state"}
CASES = {
    "llama7b": ("jobs/llama7b.yaml", []),
    "llama70b": ("jobs/llama70b.yaml", []),
    "llama175b": ("jobs/llama175b.yaml", []),
    "llama7b_variants": ("jobs/llama7b.yaml", [
        "cluster.spot=true", "cluster.max_wait=2d", "cluster.kms_key_id=arn:aws:kms:us-west-2:111122223333:key/abc",
        "cluster.subnets=[subnet-0123abcd]", "cluster.security_group_ids=[sg-0123abcd]", "role=SmpRole",
        "secrets={DB_PASS: arn:aws:secretsmanager:us-west-2:111122223333:secret:db-AbCdEf}",
        "environment={HF_TOKEN: hf_secretvalue123, PLAIN: x}", "data.validation=s3://pinned-bucket/val",
        "framework.image_uri=111122223333.dkr.ecr.us-west-2.amazonaws.com/img:1",
        "smp.tensor_parallel_degree=2", "cluster.instance_type=ml.p5.48xlarge"]),
}
GIT_TAG = "smp-launch:git-commit"  # the commit of this checkout: provenance, not part of the pin
# The tarball's digest names its S3 folder: it changes with every template edit (the goldens pin the
# files), so the pin holds a placeholder there and the test checks the digest is the tarball's own.
DIGEST = re.compile(r"/smp/code/[0-9a-f]{24}/sourcedir")


def pinned_shape(data):
    data["estimator"]["tags"] = [t for t in data["estimator"]["tags"] if t["Key"] != GIT_TAG]
    data["request"]["Tags"] = [t for t in data["request"]["Tags"] if t["Key"] != GIT_TAG]
    return json.loads(DIGEST.sub("/smp/code/<tarball digest>/sourcedir", json.dumps(data)))


def plan_for(case):
    path, sets = CASES[case]
    return build_plan(load_spec(REPO / path, sets, env=ENV), now=NOW, env=ENV, region="us-west-2")


@pytest.mark.parametrize("case", sorted(CASES))
def test_to_dict_equals_the_pinned_plan_json_keys_values_and_order(case):
    plan = plan_for(case)
    assert f"/{plan.source.tarball_sha256[:24]}/" in plan.to_dict()["source_uri"]
    got = pinned_shape(plan.to_dict())
    want = PINNED[case]
    got["spec_file"] = want["spec_file"]  # the path as given: absolute here, relative when captured
    assert got == want
    assert json.dumps(got) == json.dumps(want)  # the key order too: pipelines may diff the text


def test_secrets_stay_redacted_in_to_dict_and_plan_json_but_reach_the_sdk():
    plan = plan_for("llama7b_variants")
    text = json.dumps(plan.to_dict())
    assert "hf_secretvalue123" not in text and "<redacted>" in text
    assert "hf_secretvalue123" not in plan.source.files["plan.json"]
    assert all("hf_secretvalue123" not in content for content in plan.source.files.values())
    assert plan.estimator.to_dict()["environment"]["HF_TOKEN"] == "hf_secretvalue123"


def test_plan_command_prints_to_dict(run_cli, monkeypatch):
    monkeypatch.setenv("SMP_LAUNCH_BUCKET", "pinned-bucket")
    r = run_cli("plan", "jobs/llama7b.yaml", "--output", "json")
    printed = json.loads(r.out)
    ours = build_plan(load_spec("jobs/llama7b.yaml", [])).to_dict()
    for volatile in ("job_name", "request", "estimator", "source_uri"):  # the job name holds the time
        printed.pop(volatile), ours.pop(volatile)
    assert printed == ours


def test_the_whole_plan_is_built_without_the_network_or_the_disk(tmp_path, monkeypatch):
    """Source bundle and request included: no AWS call (sockets refused), no file written."""
    import socket

    def refuse(*_a, **_k):
        raise AssertionError("building a plan opened a connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.chdir(tmp_path)
    plan = plan_for("llama7b_variants")
    assert plan.source.uri.startswith("s3://pinned-bucket/smp/code/")
    assert plan.source.uri == plan.to_dict()["source_uri"]
    assert plan.request["TrainingJobName"] == plan.job_name and plan.request["RoleArn"] == "<ARN of role SmpRole>"
    assert set(plan.source.files) >= {"train.py", "plan.json", "distribution.json", "requirements.txt"}
    assert list(tmp_path.iterdir()) == []


def test_the_plans_request_cannot_be_changed_through_what_it_returns():
    plan = plan_for("llama7b")
    plan.request["RoleArn"] = "changed"
    plan.to_dict()["request"]["HyperParameters"].clear()
    assert plan.request["RoleArn"] == "<no role: set role or SMP_LAUNCH_ROLE>" and plan.request["HyperParameters"]
    with pytest.raises(TypeError):
        plan.source.files["train.py"] = "print('x')"
