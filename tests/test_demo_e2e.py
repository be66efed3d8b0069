"""The README's quick start without AWS, as a newcomer runs it: `python -m emulator` (what `make emulator` runs) in
one process, then the README's block from its exports to `wait latest` in a shell with nothing else set, the
installed CLI named as the README names it. Every command exits 0, the role check passes on the README's own
policies, and the job runs its whole lifecycle. The account itself is emulator/account.py (its policies are held
to the pages' by tests/test_docs_examples.py)."""
from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import time

import boto3
import pytest

import emulator
from emulator import account
from launcher import api
from tests.conftest import REPO
from tests.doc_blocks import blocks, shell_lines

PREFIX = ".venv/bin/smp-launch "


def demo_block() -> list[str]:
    """The README's shell block that starts the emulator: its lines, `make emulator` first."""
    (block,) = [b for b in blocks(REPO / "README.md") if b.lang == "sh" and "make emulator" in shell_lines(b)]
    return shell_lines(block)


@pytest.fixture
def demo(tmp_path):
    """`python -m emulator` on a free port, its jobs training 2 s; yields (its first lines, its export lines)."""
    proc = subprocess.Popen([sys.executable, "-m", "emulator", "--port", "0", "--training", "2"], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            assert line, f"python -m emulator ended: {proc.stderr.read()[-2000:]}"
            lines.append(line.rstrip("\n"))
            if line.startswith("Ctrl-C stops"):
                break
        yield lines, [ln for ln in lines if ln.startswith("export ")]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_the_readme_quick_start_runs_against_the_demo_account(demo, tmp_path):
    lines, exports = demo
    first = lines[0]  # where it is and what it holds
    assert f"bucket {account.BUCKET}" in first and f"job role {account.ROLE}" in first
    assert f"pipeline role {account.PIPELINE_ROLE}" in first
    assert any("submit jobs/llama7b.yaml" in ln for ln in lines) and any("logs latest" in ln for ln in lines)
    shown = demo_block()
    assert shown[0] == "make emulator"
    readme_exports = [ln for ln in shown if ln.startswith("export ")]
    port = re.search(r"127\.0\.0\.1:(\d+)", exports[0])[1]
    assert exports == [ln.replace(":5055", f":{port}") for ln in readme_exports]  # what it prints, as shown
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "XDG_STATE_HOME": str(tmp_path / "state"),
           "AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": str(tmp_path / "none"),
           "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none")}
    for line in exports:
        env.update(dict(word.split("=", 1) for word in shlex.split(line)[1:]))
    ran = {}
    for command in [ln for ln in shown if ln.startswith(PREFIX)]:
        out = subprocess.run(shlex.split(command), cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, f"{command}\n{out.stdout[-2000:]}{out.stderr[-2000:]}"
        assert "Traceback" not in out.stderr, out.stderr
        ran[command[len(PREFIX):]] = out.stdout
    assert re.search(r"role arn:aws:iam::\d+:role/SMPTrainingRole: pass", ran["check-role jobs/llama7b.yaml"])
    assert "dry run: would start" in ran["submit jobs/llama7b.yaml --dry-run"]
    started = ran["submit jobs/llama7b.yaml"]
    job = re.search(r"^started (\S+) in us-west-2$", started, flags=re.M)[1]
    assert f"follow:  {PREFIX}logs {job}" in started  # the hint names the CLI as this shell runs it
    assert re.search(r"\(\d+\.\d KiB, uploaded\)", started)  # the source tarball's size
    assert "[algo-1]" in ran["logs latest"] and "SMP_PROGRESS" in ran["logs latest"]
    status = ran["status latest"]
    assert re.search(r"^status:\s+Completed$", status, flags=re.M)
    assert all(phase in status for phase in ("Starting", "Downloading", "Training", "Uploading", "Completed"))
    assert f"{job}: Completed" in ran["wait latest"]


def test_the_demo_role_check_fails_naming_the_action_a_policy_lacks(monkeypatch):
    """IAM's simulation on the emulator answers for the README's policy: drop one statement and the role check
    fails (exit 3 for submit) with the action that statement allowed."""
    monkeypatch.setenv("SMP_LAUNCH_BUCKET", account.BUCKET)
    monkeypatch.setenv("SMP_LAUNCH_ROLE", account.ROLE)
    plan = api.build_plan(api.load_spec(str(REPO / "jobs" / "llama7b.yaml")), region=account.REGION)
    with emulator.mocked():
        session = boto3.Session(region_name=account.REGION)
        account.seed(session)
        assert api.check_role(plan, clients=api.Clients(region=account.REGION)).verdict == "pass"
        lacking = account.permissions()
        lacking["Statement"] = [s for s in lacking["Statement"] if "cloudwatch:PutMetricData" not in json.dumps(s)]
        session.client("iam").put_role_policy(RoleName=account.ROLE, PolicyName="smp-job",
                                              PolicyDocument=json.dumps(lacking))
        check = api.check_role(plan, clients=api.Clients(region=account.REGION))
        assert check.verdict == "fail" and [m["action"] for m in check.missing] == ["cloudwatch:PutMetricData"]
        with pytest.raises(api.RoleRefused) as refused:
            api.submit(plan, dry_run=True, clients=api.Clients(region=account.REGION))
        assert refused.value.exit_code == 3 and "cloudwatch:PutMetricData" in str(refused.value)

