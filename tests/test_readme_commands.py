"""Every `smp-launch` command the README shows runs as written (its own `plan jobs/llama70b.yaml --set
cluster.instance_count=16` example exited 2): the offline ones in a copy of jobs/ and schema/, the ones that
read AWS against the emulator in a moto server, with `JOB` an emulated job and `latest` the one submitted.
Each runs through the console script's entry point in this process (run_as_written), its argv the README's words."""
import glob
import json
import os
import re
import shlex
import shutil
import sys
from pathlib import Path

import boto3
import pytest

import emulator
from tests.aws_setup import BUCKET, REGION
from tests.conftest import REPO, call_main
from tests.test_pipeline import pipeline_world

PREFIX = ".venv/bin/smp-launch "
OFFLINE = {"validate", "plan", "schema", "advise", "render", "rules"}
# Run elsewhere: a minute of CPU each (tests/test_local_run.py runs the same command).
ELSEWHERE = ("--local",)


def readme_commands() -> list[str]:
    """The README's shell lines that run the CLI, without their trailing comments."""
    lines, fence = [], None
    for line in (REPO / "README.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fence = None if fence is not None else line[3:].strip()
        elif fence in ("", "sh", "bash") and line.startswith(PREFIX):
            lines.append(re.split(r"\s+#\s", line, maxsplit=1)[0].strip())
    return lines


COMMANDS = readme_commands()


def verb(command: str) -> str:
    return shlex.split(command)[1]


def argv(command: str, cwd: Path, job: str = "JOB") -> tuple[list[str], str]:
    """The command's arguments as a shell would pass them (globs expanded in cwd), and what it pipes into."""
    line, _, pipe = command.partition(" | ")
    words = []
    for word in shlex.split(line[len(PREFIX):]):
        matches = sorted(glob.glob(word, root_dir=cwd)) if any(c in word for c in "*?[") else []
        words += matches or [job if word == "JOB" else word]
    return words, pipe


@pytest.fixture
def sandbox(tmp_path) -> Path:
    """A working directory like the repository's: the example jobs and the schema they name."""
    for name in ("jobs", "schema"):
        shutil.copytree(REPO / name, tmp_path / name)
    return tmp_path


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "SMP_LAUNCH_"))}
    return {**env, "NO_COLOR": "1", **extra}


def run_as_written(args: list[str], env: dict[str, str], cwd: Path, monkeypatch, capsys) -> tuple[int, str, str]:
    """`smp-launch ARGS` through the console script's entry point (`launcher.cli:main`, what
    `.venv/bin/smp-launch` calls) in this process: exactly `env` as its environment, `cwd` as its working
    directory, stdin not a terminal (as from a script). Returns (exit code, stdout, stderr).

    In-process, not a subprocess: the words as written are what these tests check, and a subprocess per
    command paid the interpreter and, for submit, rerun and pipeline, the SageMaker SDK's import (~2.5 CPU-s)
    each time. Every one of these commands also runs as a fresh installed-CLI process in the e2e modules."""
    import io

    for k in [k for k in os.environ if k not in env]:
        monkeypatch.delenv(k)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    r = call_main(args, capsys)
    return r.code, r.out, r.err


def test_the_readme_shows_the_commands_this_test_runs():
    verbs = {verb(c) for c in COMMANDS}
    assert {"validate", "plan", "schema", "advise", "render", "logs", "status", "list", "stop", "metrics",
            "check-role", "submit"} <= verbs, verbs


@pytest.mark.parametrize("command", [c for c in COMMANDS if verb(c) in OFFLINE])
def test_an_offline_readme_command_runs_as_written(command, sandbox, monkeypatch, capsys):
    args, _ = argv(command, sandbox)
    code, out, err = run_as_written(args, _env(XDG_STATE_HOME=str(sandbox / "state")), sandbox, monkeypatch, capsys)
    assert code == 0, f"{command}\n{err[-2000:]}"
    if args[-2:] == ["--output", "json"] or verb(command) == "schema":
        json.loads(out)


@pytest.fixture
def endpoint(moto_server):
    return moto_server  # one server per test process (tests/conftest.py); each test resets it


# How a job created without a script runs (emulator.set_default): short, with log lines on every host.
QUICK_JOB = {"starting": 0.3, "downloading": 0.2, "training": 1.0, "uploading": 0.2, "line_interval": 0.2,
             "decoy": False}
# `submit --retry` waits for its job's end (polling every 5 s, the default): a job already Completed when it
# is created ends that wait at its first poll.
ENDED_JOB = {"starting": 0, "downloading": 0, "training": 0, "uploading": 0, "decoy": False}


def aws_order(commands: list[str]) -> list[str]:
    """check-role and submit first (so `latest` names a job), then the README's order, except that `logs latest`
    and `wait JOB latest` come right after the commands on JOB (before `rerun` starts a newer `latest`): by
    then the jobs they follow have ended, so neither waits a poll interval (5 s for logs, 30 s for wait)."""
    def rank(c: str) -> int:
        words = shlex.split(c)
        if verb(c) in ("check-role", "submit"):
            return 0
        if "latest" in words and verb(c) in ("logs", "wait"):
            return 2
        return 1 if "JOB" in words else 3
    return sorted(commands, key=rank)


def test_aws_order_puts_submit_first_and_follows_latest_before_a_rerun():
    order = aws_order([c for c in COMMANDS if verb(c) not in OFFLINE])
    at = {c: i for i, c in enumerate(order)}
    submits = [at[c] for c in order if verb(c) in ("check-role", "submit")]
    on_latest = [at[c] for c in order if verb(c) in ("logs", "wait") and "latest" in shlex.split(c)]
    on_job = [at[c] for c in order if "JOB" in shlex.split(c) and at[c] not in on_latest]
    reruns = [at[c] for c in order if verb(c) in ("rerun", "pipeline")]
    assert submits and on_latest and on_job and reruns
    assert max(submits) < min(on_job) and max(on_job) < min(on_latest) and max(on_latest) < min(reruns)
    assert sorted(order) == sorted(c for c in COMMANDS if verb(c) not in OFFLINE)


def test_the_aws_readme_commands_run_against_the_emulator(endpoint, sandbox, monkeypatch, capsys):
    """Submit first (so `latest` names a job), then each command in the README's order (see aws_order), each
    through the CLI's entry point with the README's words as its argv (run_as_written)."""
    emulator.reset_server(endpoint)
    env = _env(**emulator.server_env(endpoint), XDG_STATE_HOME=str(sandbox / "state"), SMP_LAUNCH_ROLE="Good",
               SMP_LAUNCH_BUCKET=BUCKET, AWS_EC2_METADATA_DISABLED="true")
    for k, v in emulator.server_env(endpoint).items():
        monkeypatch.setenv(k, v)
    session = boto3.Session(region_name=REGION)
    pipeline_world(session)  # create_world plus a role that may run a pipeline (the README shows one)
    job = emulator.add_job(emulator.EmulatedJob("llama-readme-1", hosts=4, starting=0.3, downloading=0.2,
                                                training=2, uploading=0.2, line_interval=0.25),
                           session.client("sagemaker"))  # short: ended when `logs JOB` follows it
    aws = [c for c in COMMANDS if verb(c) not in OFFLINE and not any(e in c for e in ELSEWHERE)]
    try:
        for command in aws_order(aws):
            args, pipe = argv(command, sandbox, job.name)
            emulator.set_default(ENDED_JOB if "--retry" in args else QUICK_JOB)
            code, out, err = run_as_written(args, env, sandbox, monkeypatch, capsys)
            if verb(command) == "stop" and "--yes" not in args:  # asks first: with no terminal, it says so
                said = (code, "pass --yes" in err, "nothing to stop" in out + err)
                assert said in ((2, True, False), (0, False, True)), f"{command}\n{out}{err[-2000:]}"
                continue
            assert code == 0, f"{command}\n{err[-2000:]}"
            if "jq" in pipe:
                records = [json.loads(line) for line in out.splitlines()]
                assert any(r.get("type") == "log" for r in records)
    finally:
        emulator.set_default(None)
