"""Every `smp-launch` command in README.md's code blocks runs, as written, and exits as the README says.

The commands run in a copy of `jobs/` (so `advise --write` and `render -o` write there), through the
installed CLI, against a moto server with the lifecycle emulator: `JOB` is an emulated job that has
ended (for `stop`, one still running: without a terminal it refuses, exit 2, as the README says),
`latest` the same ended job recorded as submitted from here, and `export` lines set the environment.
A pipe's consumer (`| jq ...`) is not run: the exit code checked is smp-launch's.
"""
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import boto3
import pytest

from launcher import emulator
from tests.aws_setup import REGION, TRUST_SAGEMAKER, create_world, job_policy
from tests.conftest import REPO

SMP = shutil.which("smp-launch", path=str(Path(sys.executable).parent)) or "smp-launch"
README = REPO / "README.md"
DONE, RUNNING = "readme-done-1", "readme-running-1"

# What the README says a command does, beyond exit 0 (matched against the command as written).
EXPECTED = {"stop JOB": 2}  # "stop asks on a terminal and refuses (exit 2) without one unless --yes"
SKIPPED = {"--local": "runs torchrun on this machine's CPUs for minutes (tests/test_local_preflight.py covers it)"}


def readme_commands(text: str) -> list[tuple[int, str]]:
    """(line number, command) for each line of a ```sh block that runs smp-launch, comments removed."""
    found, in_block = [], False
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("```"):
            in_block = line.strip() == "```sh" and not in_block
            continue
        if in_block and (line.startswith(".venv/bin/smp-launch ") or line.startswith("export ")):
            found.append((number, " ".join(shlex.split(line, comments=True, posix=False))))
    return found


def expected_code(command: str) -> int:
    return next((code for pattern, code in EXPECTED.items() if f"smp-launch {pattern}" in command), 0)


def test_the_readme_shows_the_commands_this_test_runs():
    commands = [c for _, c in readme_commands(README.read_text())]
    assert sum(c.startswith(".venv/bin/smp-launch") for c in commands) >= 18
    for sub in ("validate", "plan", "schema", "logs", "status", "list", "stop", "metrics", "advise", "render",
                "submit", "check-role"):
        assert any(c.startswith(f".venv/bin/smp-launch {sub} ") or c == f".venv/bin/smp-launch {sub}"
                   for c in commands), sub


@pytest.fixture(scope="module")
def endpoint():
    with emulator.server() as url:
        yield url


@pytest.fixture
def readme_world(endpoint, monkeypatch, tmp_path):
    emulator.reset_server(endpoint)
    for k, v in emulator.server_env(endpoint).items():
        monkeypatch.setenv(k, v)
    session = boto3.Session(region_name=REGION)
    create_world(session)
    iam = session.client("iam")  # the README's own role name (`export SMP_LAUNCH_ROLE=SMPTrainingRole`)
    iam.create_role(RoleName="SMPTrainingRole", AssumeRolePolicyDocument=json.dumps(TRUST_SAGEMAKER))
    iam.put_role_policy(RoleName="SMPTrainingRole", PolicyName="job", PolicyDocument=json.dumps(job_policy()))
    sm = session.client("sagemaker")
    emulator.set_clock(lambda: time.time() - 3600)
    try:
        emulator.add_job(emulator.EmulatedJob(DONE, hosts=4, training=120), sm)
    finally:
        emulator.set_clock(None)
    emulator.add_job(emulator.EmulatedJob(RUNNING, training=3600), sm)
    state = tmp_path / "state"
    from launcher.state import record_submitted

    record_submitted(DONE, REGION, env={"XDG_STATE_HOME": str(state)})
    work = tmp_path / "repo"
    shutil.copytree(REPO / "jobs", work / "jobs")
    shutil.copytree(REPO / "schema", work / "schema")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SMP_LAUNCH_")}
    env.update(emulator.server_env(endpoint), XDG_STATE_HOME=str(state), AWS_EC2_METADATA_DISABLED="true")
    return work, env


def run_readme_command(command: str, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    command = command.split(" | ")[0]
    job = RUNNING if command.startswith(".venv/bin/smp-launch stop ") else DONE
    command = re.sub(r"\bJOB\b", job, command).replace(".venv/bin/smp-launch", shlex.quote(SMP), 1)
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_every_readme_command_exits_as_the_readme_says(readme_world):
    work, env = readme_world
    ran, skipped = [], []
    for number, command in readme_commands(README.read_text()):
        if command.startswith("export "):
            name, _, value = command.removeprefix("export ").partition("=")
            env[name] = value
            continue
        reason = next((why for flag, why in SKIPPED.items() if flag in command.split()), None)
        if reason:
            skipped.append((number, command, reason))
            continue
        out = run_readme_command(command, work, env)
        want = expected_code(command)
        assert out.returncode == want, f"README.md:{number}: {command}\nexit {out.returncode}, not {want}\n" \
                                       f"{out.stderr[-2000:]}"
        assert "Traceback" not in out.stderr, f"README.md:{number}: {command}\n{out.stderr[-2000:]}"
        ran.append(command)
    assert len(ran) >= 17 and [c for _, c, _ in skipped] == [
        ".venv/bin/smp-launch submit jobs/llama7b.yaml --local --tiny --max-steps 20"]
    assert (work / "jobs" / "llama7b-4m.yaml").is_file() and (work / "build" / "llama7b" / "train.py").is_file()
    listed = boto3.Session(region_name=REGION).client("sagemaker").list_training_jobs()["TrainingJobSummaries"]
    assert any(j["TrainingJobName"].startswith("llama2-7b-") for j in listed)  # the last command started a job
