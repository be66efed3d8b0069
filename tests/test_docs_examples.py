"""Every example in README.md and docs/*.md runs as written, so the documentation cannot rot.

- A shell line `.venv/bin/smp-launch ...` runs through the console script's entry point in this process
  (run_as_written), its argv the page's words: the offline ones in a copy of jobs/, schema/ and docs/, the
  ones that read AWS against the emulator in a moto server, with `JOB` an emulated job and `latest` the one
  submitted, after the pages' `export` lines.
- A `make TARGET ...` line is expanded with `make -n` and each command it runs is taken the same way;
  MAKE_NOT_RUN names, with the reason, the targets that run the suite itself or a long measurement.
- A python block is executed against moto in-process, on a virtual clock; a yaml block is validated as a spec;
  a json block must parse, and the README's role policies are what the emulated job role is made of.
- `make docs`'s mkdocs build runs --strict in a copy of the repository, and its site loads nothing remote.
- A block opts out only with a first line `# not run: REASON` (tests/doc_blocks.py), and such blocks stay few.
"""
from __future__ import annotations

import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import boto3
import pytest

import emulator
from emulator import account
from tests.aws_setup import TRUST_SAGEMAKER
from tests.batch_world import create_queues
from tests.conftest import REPO, call_main
from tests.doc_blocks import Block, all_blocks, shell_lines

BLOCKS = all_blocks()
LANGS = {"sh", "python", "yaml", "text", "json"}  # sh, python and yaml blocks are run; text and json are output
MAX_NOT_RUN = 3

PREFIX = ".venv/bin/smp-launch "
MKDOCS = ".venv/bin/mkdocs "
OFFLINE = {"validate", "plan", "schema", "advise", "render", "rules"}
# Parsed here, run elsewhere: a minute of CPU each (tests/test_local_run.py runs `submit --local --tiny`).
ELSEWHERE = ("--local",)
# `make` targets expanded here (the target exists and runs these commands) but not run, and why.
MAKE_NOT_RUN = {
    "test": "the test suite itself: CI runs `make test`",
    "bench": "minutes of measurement (docs/benchmarks.md)",
    "reliability": "minutes of fault injection; tests/test_reliability_short.py runs a short version",
    "mutation": "a 600 s mutation budget; tests/test_reliability_short.py runs a short version",
    "emulator": "serves until Ctrl-C; tests/test_demo_e2e.py starts `python -m emulator` and runs the README's "
                "block against it",
}


@dataclass(frozen=True)
class Step:
    """One command a page shows, as a shell would run it."""

    where: str  # FILE:LINE of the block, and the make line it came from
    text: str  # the command (for a make line, one command the target runs)
    kind: str  # cli, mkdocs, export, make-not-run, unknown
    reason: str = ""
    target: str = ""  # the make target it came from


@cache
def make_expansion(words: tuple[str, ...]) -> tuple[str, ...]:
    """The commands `make WORDS` runs, without running them (the venv counts as built)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE")}
    env["TEST_WORKERS"] = "1"  # given, so that make does not start a Python to count the CPUs
    out = subprocess.run(["make", "-n", "-s", "--no-print-directory", "-o", ".venv/.installed", *words], cwd=REPO,
                         env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, f"make {' '.join(words)}: {out.stderr}"
    return tuple(line.strip() for line in out.stdout.splitlines() if line.strip())


def steps_of(line: str, where: str) -> list[Step]:
    if line.startswith(PREFIX):
        return [Step(where, line, "cli")]
    if line.startswith(MKDOCS):
        return [Step(where, line, "mkdocs")]
    if line.startswith("export "):
        return [Step(where, line, "export")]
    if line.startswith("make "):
        words = tuple(shlex.split(line)[1:])
        target = next(w for w in words if "=" not in w)
        expanded = make_expansion(words)
        if target in MAKE_NOT_RUN:
            return [Step(f"{where} ({line})", "\n".join(expanded), "make-not-run", MAKE_NOT_RUN[target], target)]
        return [s for command in expanded for s in steps_of(command, f"{where} ({line})")]
    return [Step(where, line, "unknown")]


def all_steps() -> list[Step]:
    return [s for b in BLOCKS if b.lang == "sh" and not b.not_run for line in shell_lines(b)
            for s in steps_of(line, str(b))]


STEPS = all_steps()
CLI = list(dict.fromkeys(s.text for s in STEPS if s.kind == "cli"))  # each command once, in page order
EXPORTS = [s.text for s in STEPS if s.kind == "export"]


def verb(command: str) -> str:
    return shlex.split(command)[1]


def exported() -> dict[str, str]:
    """The pages' `export NAME=VALUE ...` lines; a name exported twice must have one value."""
    values: dict[str, str] = {}
    for line in EXPORTS:
        for assignment in shlex.split(line)[1:]:
            name, _, value = assignment.partition("=")
            assert values.setdefault(name, value) == value, f"{name} is exported as {values[name]!r} and {value!r}"
    return values


def argv(command: str, cwd: Path, job: str = "JOB") -> tuple[list[str], str, str]:
    """The command's arguments as a shell would pass them (globs expanded in cwd), what it pipes into, and the
    file its stdout is redirected to."""
    line, _, pipe = command.partition(" | ")
    line, _, redirect = line.partition(" > ")
    words = []
    for word in shlex.split(line[len(PREFIX):]):
        matches = sorted(glob.glob(word, root_dir=cwd)) if any(c in word for c in "*?[") else []
        words += matches or [job if word == "JOB" else word]
    return words, pipe.strip(), redirect.strip()


@pytest.fixture
def sandbox(tmp_path) -> Path:
    """A working directory like the repository's: the example jobs, the schema they name, the docs site."""
    for name in ("jobs", "schema", "docs"):
        shutil.copytree(REPO / name, tmp_path / name)
    shutil.copy(REPO / "mkdocs.yml", tmp_path)
    return tmp_path


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "SMP_LAUNCH_"))}
    return {**env, "NO_COLOR": "1", **exported(), **extra}


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


# ---- what the pages hold


def test_every_block_names_a_language_this_test_knows():
    unknown = [f"{b} ```{b.lang}" for b in BLOCKS if b.lang not in LANGS]
    assert not unknown, unknown


def test_every_json_block_parses():
    for block in [b for b in BLOCKS if b.lang == "json"]:
        json.loads(block.text)


def test_blocks_not_run_are_few_and_each_says_why():
    not_run = [(str(b), b.not_run) for b in BLOCKS if b.not_run]
    assert len(not_run) <= MAX_NOT_RUN, not_run
    assert all(len(reason) > 10 for _, reason in not_run), not_run


def test_a_block_opts_out_only_with_a_visible_reason_in_its_first_line():
    assert Block("x.md", 1, "sh", "", "# not run: needs a real AWS account\nmake x\n").not_run == \
        "needs a real AWS account"
    assert Block("x.md", 1, "sh", "", "make x\n# not run: needs a real AWS account\n").not_run is None
    assert Block("x.md", 1, "sh", "", "make x  # not run: at the end of a line\n").not_run is None
    assert Block("x.md", 1, "sh", "", "# not run:\nmake x\n").not_run is None  # no reason given


def test_every_shell_line_is_one_this_test_runs():
    unknown = [f"{s.where}: {s.text}" for s in STEPS if s.kind == "unknown"]
    assert not unknown, "no runner for these lines: add one, or mark the block `# not run: REASON`\n" + \
        "\n".join(unknown)


def test_the_pages_show_every_command():
    from launcher.cli import cli

    shown = {verb(c) for c in CLI}
    assert set(cli.list_commands(None)) <= shown, set(cli.list_commands(None)) - shown
    assert {"validate", "plan", "schema", "advise", "render", "logs", "status", "list", "stop", "metrics",
            "check-role", "submit"} <= shown, shown


def test_the_options_table_names_exactly_the_commands_that_take_each_option():
    from launcher.cli import cli

    def takes(option: str) -> set[str]:
        return {name for name, command in cli.commands.items() if any(option in p.opts for p in command.params)}

    rows = {line.split("|")[1].strip(): line.split("|")[2] for line in
            (REPO / "docs" / "commands.md").read_text(encoding="utf-8").splitlines() if line.startswith("| `--")}
    assert set(re.findall(r"`([a-z-]+)`", rows["`--profile NAME`, `--region REGION`"])) == takes("--profile") \
        == takes("--region")
    assert set(re.findall(r"`([a-z-]+)`", rows["`--set KEY.PATH=VALUE`"])) == takes("--set")
    assert set(re.findall(r"`([a-z-]+)`", rows["`--templates DIR`"])) == takes("--templates")
    assert rows["`--output json`"].startswith(" every command ")
    assert set(cli.commands) == takes("--output")


def test_the_pages_export_the_bucket_and_the_role():
    assert {"SMP_LAUNCH_BUCKET", "SMP_LAUNCH_ROLE"} <= set(exported())


def test_targets_not_run_are_real_targets_that_run_what_they_say():
    not_run = {s.target: s.text for s in STEPS if s.kind == "make-not-run"}
    assert "pytest" in not_run["test"] and "python -m emulator" in not_run["emulator"], not_run
    assert all(text for text in not_run.values()), not_run  # `make -n` printed the commands: the target exists


# ---- offline commands, the site


@pytest.mark.parametrize("command", [c for c in CLI if verb(c) in OFFLINE])
def test_an_offline_command_runs_as_written(command, sandbox, monkeypatch, capsys):
    args, pipe, redirect = argv(command, sandbox)
    code, out, err = run_as_written(args, _env(XDG_STATE_HOME=str(sandbox / "state")), sandbox, monkeypatch, capsys)
    assert code == 0, f"{command}\n{err[-2000:]}"
    if redirect:
        (sandbox / redirect).write_text(out)
    if args[-2:] == ["--output", "json"] or args == ["schema"]:
        json.loads(out)


@pytest.mark.parametrize("command", [c for c in CLI if ELSEWHERE[0] in c])
def test_a_local_run_command_is_a_valid_invocation(command):
    """Parsed by the CLI, not run: a minute of CPU (tests/test_local_run.py runs `submit --local --tiny`)."""
    from launcher.cli import cli

    args, _, _ = argv(command, REPO)
    ctx = cli.get_command(None, args[0]).make_context(args[0], args[1:])
    assert ctx.params["local"] is True

def test_the_site_builds_strictly_and_offline(sandbox):
    """`make docs` as the pages show it: docs/rules.md regenerated (above), then mkdocs --strict."""
    (mkdocs,) = {s.text for s in STEPS if s.kind == "mkdocs"}
    out = subprocess.run([sys.executable, "-m", "mkdocs", *shlex.split(mkdocs)[1:]], cwd=sandbox,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    site = sandbox / "build" / "site"
    pages = sorted(p.relative_to(site).as_posix() for p in site.glob("*.html") if p.name != "404.html")
    assert pages == sorted(f"{p.stem}.html" for p in (REPO / "docs").glob("*.md")), pages  # every page built, a file
    broken = []  # the site opens from the file system: every local link names a file that is there
    for page in (site / name for name in pages):  # 404.html is for a web server, whose root it links from
        for href in re.findall(r'<a [^>]*href="([^"#:?]+)(?:#[^"]*)?"', page.read_text()):
            if not (page.parent / href).is_file():
                broken.append((page.name, href))
    assert not broken, broken[:10]
    remote = [(p, m) for p in site.rglob("*.html")
              for m in re.findall(r'<(?:script|link)[^>]+(?:src|href)="(?:https?:)?//[^"]*"', p.read_text())]
    assert not remote, remote[:5]  # nothing loaded from the network


# ---- commands that talk to AWS


@pytest.fixture
def endpoint(moto_server):
    return moto_server  # one server per test process (tests/conftest.py); each test resets it


# How a job created without a script runs (emulator.set_default): short, with log lines on every host.
# Two seconds of training: ten progress lines a host, enough for `calibrate` to find a steady state.
QUICK_JOB = {"starting": 0.3, "downloading": 0.2, "training": 2.0, "uploading": 0.2, "line_interval": 0.2,
             "decoy": False}
# `submit --retry` and `submit --wait` wait for their job's end (polling every 5 s, the default): a job that ends
# two seconds after it is created ends that wait by the second poll, and has logged the ten progress lines
# `calibrate latest` reads (the retried submit is the last one the pages run).
ENDED_JOB = {"starting": 0, "downloading": 0, "training": 2.0, "uploading": 0, "line_interval": 0.2,
             "decoy": False}


def aws_order(commands: list[str]) -> list[str]:
    """check-role and submit first (so `latest` names a job), then the pages' order, except that `logs latest`,
    `wait JOB latest` and `calibrate latest` come right after the commands on JOB (before `rerun` starts a newer
    `latest`): by then the jobs they follow have ended, so neither waits a poll interval (5 s,
    launcher.POLL_S) and calibrate finds its job finished.
    `stop` comes last, so that no command after it finds its job stopped."""
    def rank(c: str) -> int:
        words = shlex.split(c)
        if verb(c) in ("check-role", "submit"):
            return 0
        if verb(c) == "stop":
            return 4
        if "latest" in words and verb(c) in ("logs", "wait", "calibrate"):  # calibrate reads a finished job
            return 2
        return 1 if "JOB" in words else 3
    return sorted(commands, key=rank)


def test_aws_order_puts_submit_first_and_follows_latest_before_a_rerun():
    order = aws_order([c for c in CLI if verb(c) not in OFFLINE])
    at = {c: i for i, c in enumerate(order)}
    submits = [at[c] for c in order if verb(c) in ("check-role", "submit")]
    on_latest = [at[c] for c in order if verb(c) in ("logs", "wait") and "latest" in shlex.split(c)]
    on_job = [at[c] for c in order if "JOB" in shlex.split(c) and at[c] not in on_latest and verb(c) != "stop"]
    reruns = [at[c] for c in order if verb(c) in ("rerun", "pipeline")]
    stops = [at[c] for c in order if verb(c) == "stop"]
    assert submits and on_latest and on_job and reruns and stops
    assert max(submits) < min(on_job) and max(on_job) < min(on_latest) and max(on_latest) < min(reruns)
    assert max(reruns) < min(stops)
    assert sorted(order) == sorted(c for c in CLI if verb(c) not in OFFLINE)


def readme_policies() -> tuple[dict, dict]:
    """The README's trust policy and permissions policy for the job role (its json blocks)."""
    policies = [json.loads(b.text) for b in BLOCKS if b.file == "README.md" and b.lang == "json"]
    (trust,) = [p for p in policies if "sts:AssumeRole" in json.dumps(p)]
    (permissions,) = [p for p in policies if p is not trust]
    return trust, permissions


def docs_world(session, bucket: str, role: str) -> None:
    """The demo account `python -m emulator` serves (emulator/account.py: the bucket and the job role the pages
    export, made with the README's own policies, the pipeline role docs/commands.md shows, a caller who may pass
    them), and the AWS Batch queues docs/batch.md submits to: the role check passes on what the pages tell a
    user to create."""
    assert (bucket, role) == (account.BUCKET, account.ROLE)  # the pages export the demo account's
    account.seed(session)
    create_queues(session)  # the AWS Batch queue docs/batch.md submits to, and the caller's right to


def test_the_readme_role_is_trusted_by_sagemaker_and_names_the_exported_bucket():
    trust, permissions = readme_policies()
    assert trust == TRUST_SAGEMAKER
    assert f"arn:aws:s3:::{exported()['SMP_LAUNCH_BUCKET']}/*" in json.dumps(permissions)


def test_the_demo_account_holds_exactly_the_policies_the_pages_show():
    """`python -m emulator` makes its job role with the README's two policies and its pipeline role with the one
    docs/commands.md shows, and exports the bucket and the role the pages export."""
    assert readme_policies() == (account.TRUST, account.permissions())
    shown = [json.loads(b.text) for b in BLOCKS if b.file == "docs/commands.md" and b.lang == "json"
             and "sagemaker:CreateTrainingJob" in b.text]
    assert shown == [account.pipeline_permissions()]
    demo = account.exports("http://127.0.0.1:5055")
    assert {k: v for k, v in exported().items() if k in demo} == demo


def test_the_aws_commands_run_against_the_emulator(endpoint, sandbox, monkeypatch, capsys):
    """Submit first (so `latest` names a job), then each command in the pages' order (see aws_order), each
    through the CLI's entry point with the page's words as its argv (run_as_written)."""
    emulator.reset_server(endpoint)
    env = _env(**emulator.server_env(endpoint), XDG_STATE_HOME=str(sandbox / "state"),
               AWS_EC2_METADATA_DISABLED="true")
    for k, v in emulator.server_env(endpoint).items():
        monkeypatch.setenv(k, v)
    session = boto3.Session(region_name=account.REGION)
    docs_world(session, env["SMP_LAUNCH_BUCKET"], env["SMP_LAUNCH_ROLE"])
    job = emulator.add_job(emulator.EmulatedJob("llama-readme-1", hosts=4, starting=0.3, downloading=0.2,
                                                training=2, uploading=0.2, line_interval=0.25),
                           session.client("sagemaker"))  # short: ended when `logs JOB` follows it
    aws = [c for c in CLI if verb(c) not in OFFLINE and not any(e in c for e in ELSEWHERE)]
    try:
        for command in aws_order(aws):
            args, pipe, _ = argv(command, sandbox, job.name)
            emulator.set_default(ENDED_JOB if {"--retry", "--wait"} & set(args) else QUICK_JOB)
            code, out, err = run_as_written(args, env, sandbox, monkeypatch, capsys)
            if verb(command) == "stop":  # asks first: with no terminal, it says so; an ended job: nothing to stop
                said = (code, "pass --yes" in err, "nothing to stop" in out + err)
                assert said in ((2, True, False), (0, False, True)), f"{command}\n{out}{err[-2000:]}"
                assert ("--yes" in args) == (said == (0, False, True)), f"{command}\n{out}{err[-2000:]}"
                continue
            assert code == 0, f"{command}\n{err[-2000:]}"
            assert "[refused:" not in err, f"a sweep the pages show refuses plans:\n{command}\n{err[-2000:]}"
            if "jq" in pipe:
                records = [json.loads(line) for line in out.splitlines()]
                assert any(r.get("type") == "log" for r in records)
            elif args[-2:] == ["--output", "json"]:
                json.loads(out)
            if verb(command) == "check-role":  # `unknown` exits 0 too: the README's policies must pass
                verdict = json.loads(out)["verdict"] if "json" in args else out
                assert re.search(r"\bpass\b", verdict), f"{command}\n{out}{err[-2000:]}"
    finally:
        emulator.set_default(None)


# ---- python and yaml blocks

# Run with its own assertions on what it printed and started.
RUN_ELSEWHERE = {("docs/api.md", "A pipeline step"): "tests/test_api_docs.py"}
PYTHON = [b for b in BLOCKS if b.lang == "python" and not b.not_run and (b.file, b.heading) not in RUN_ELSEWHERE]


def test_the_blocks_run_elsewhere_exist():
    assert {(b.file, b.heading) for b in BLOCKS if b.lang == "python"} >= set(RUN_ELSEWHERE)


@pytest.mark.parametrize("block", PYTHON, ids=str)
def test_a_python_block_runs_against_moto(block, moto_world, clock, monkeypatch, capsys):
    import launcher.jobs.status

    monkeypatch.chdir(REPO)
    monkeypatch.delenv("SMP_LAUNCH_BUCKET", raising=False)  # the example jobs' default bucket, which `moto_world` holds
    monkeypatch.setenv("SMP_LAUNCH_ROLE", "Good")
    monkeypatch.setattr(launcher.jobs.status.time, "sleep", clock.sleep)  # wait() polls on the virtual clock
    exec(compile(block.text, str(block), "exec"), {"__name__": "__docs__"})
    capsys.readouterr()


YAML = [b for b in BLOCKS if b.lang == "yaml" and not b.not_run]


@pytest.mark.parametrize("block", YAML, ids=str)
def test_a_yaml_block_is_a_valid_spec_or_fragment(block, sandbox, monkeypatch, capsys):
    """A whole spec (it has `name:`) is validated as it is; a fragment on top of jobs/llama7b.yaml."""
    text = block.text if re.search(r"^name:", block.text, flags=re.M) else "extends: llama7b.yaml\n" + block.text
    path = sandbox / "jobs" / "docs-example.yaml"
    path.write_text(text)
    code, out, err = run_as_written(["validate", str(path)], _env(XDG_STATE_HOME=str(sandbox / "state")), sandbox,
                                    monkeypatch, capsys)
    assert code == 0, f"{block}\n{text}\n{out}{err}"
