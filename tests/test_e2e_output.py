"""End to end, the installed CLI as a subprocess: output a terminal and a pipeline can trust, and a
plain moto_server (no emulator patches: no IAM simulation) giving "cannot tell", never a traceback."""
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import boto3
import pytest

import emulator
from emulator.refuse import refuse_create
from launcher.core.sanitize import clean
from tests.aws_setup import REGION, create_world
from tests.conftest import REPO

SMP = shutil.which("smp-launch", path=str(Path(sys.executable).parent)) or "smp-launch"
HOSTILE = "boom \x1b]0;owned\x07\x1b]52;c;ZWNobyBwd25lZA==\x07\x1b[2J\u202eevil\r\nfake line"


def said(stderr: str) -> list[str]:
    """stderr's lines but the "waiting for ..." notices a slow (loaded) machine may add."""
    return [ln for ln in stderr.strip().splitlines() if not ln.startswith("waiting for ")]


def cli(env, *args, closed_stdout=False):
    """Run the CLI; with closed_stdout its stdout is a pipe whose reader has already gone (`| head`)."""
    if not closed_stdout:
        return subprocess.run([SMP, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    r, w = os.pipe()
    os.close(r)
    try:
        return subprocess.run([SMP, *args], cwd=REPO, env=env, stdout=w, stderr=subprocess.PIPE, text=True,
                              timeout=120)
    finally:
        os.close(w)


# -- 6. SageMaker's refusal is one line ---------------------------------------------------------------

def test_a_refused_create_training_job_is_one_clean_line_and_nothing_else(server_world):
    env = server_world.env
    refuse_create("ValidationException", f"Instance type is not supported {HOSTILE}")
    try:
        out = cli(env, "submit", "jobs/llama7b.yaml", "--set", "role=Good")
    finally:
        refuse_create(None)
    last = out.stderr.strip().splitlines()[-1]
    assert out.returncode == 4 and out.stdout == "" and "Traceback" not in out.stderr
    assert last.startswith("CreateTrainingJob: SageMaker rejected the request: Instance type is not supported boom")
    assert "\x1b" not in out.stderr and "\u202e" not in out.stderr and "\\x1b]0;owned" in last
    # Nothing else: that one line, SageMaker's message whole (escaped), and nothing after it.
    assert said(out.stderr) == [
        "CreateTrainingJob: SageMaker rejected the request: Instance type is not supported " + clean(HOSTILE)]
    assert last.endswith("\\x0afake line")


# -- 7. escapes from AWS; closed pipes ----------------------------------------------------------------

def test_escapes_in_a_failure_reason_are_shown_never_obeyed(server_world):
    session, env = server_world.session, server_world.env
    emulator.set_clock(lambda: time.time() - 3600)
    try:
        emulator.add_job(emulator.EmulatedJob("hostile-1", outcome="Failed", failure_reason=HOSTILE, training=60),
                         session.client("sagemaker"))
    finally:
        emulator.set_clock(None)
    table = cli(env, "status", "hostile-1")
    as_json = cli(env, "status", "hostile-1", "--output", "json")
    listed = cli(env, "list", "--output", "json")
    for out in (table, as_json):
        assert out.returncode == 1
        assert not any(c in out.stdout for c in "\x1b\x07\r\u202e"), repr(out.stdout)
    assert "failure reason:   boom \\x1b]0;owned\\x07" in table.stdout
    # its line break is a line of its own, under the value: it cannot pass for a line of the table
    reason_at = table.stdout.index("failure reason:")
    indent = len("failure reason:   ")
    fake = next(ln for ln in table.stdout[reason_at:].splitlines() if "fake line" in ln)
    assert fake.startswith(" " * indent) and fake.strip().startswith("fake line") and "\\x0a" not in table.stdout
    reason = json.loads(as_json.stdout)["failure_reason"]
    assert reason.startswith("boom \\x1b]0;owned\\x07\\x1b]52;c;") and "\\u202eevil\\x0d\\x0afake line" in reason
    assert [r["job_name"] for r in json.loads(listed.stdout)] == ["hostile-1"]


@pytest.fixture
def jobs_running(server_world):
    session, env = server_world.session, server_world.env
    emulator.set_clock(lambda: time.time() - 600)
    try:
        emulator.add_job(emulator.EmulatedJob("piped-1", hosts=2, training=3600), session.client("sagemaker"))
    finally:
        emulator.set_clock(None)
    return env


PIPED = {
    "plan": ["plan", "jobs/llama7b.yaml"], "plan-json": ["plan", "jobs/llama7b.yaml", "--output", "json"],
    "validate": ["validate", "jobs/llama7b.yaml", "jobs/llama70b.yaml"], "rules": ["rules"], "schema": ["schema"],
    "advise": ["advise", "--model", "llama2-7b", "--instances", "2"], "help": ["--help"],
    "submit-help": ["submit", "--help"], "version": ["--version"],
    "status": ["status", "piped-1"], "status-json": ["status", "piped-1", "--output", "json"],
    "list": ["list"], "metrics": ["metrics", "piped-1", "--since", "15m"],
    "metrics-json": ["metrics", "piped-1", "--output", "json"], "logs-json": ["logs", "piped-1", "--no-follow",
                                                                             "--output", "json"],
    "check-role": ["check-role", "jobs/llama7b.yaml", "--set", "role=Good", "--output", "json"],
    "dry-run": ["submit", "jobs/llama7b.yaml", "--set", "role=Good", "--dry-run"],
}


@pytest.mark.parametrize("name", sorted(PIPED))
def test_a_closed_pipe_is_a_quiet_exit_0(jobs_running, name):
    out = cli(jobs_running, *PIPED[name], closed_stdout=True)
    assert (out.returncode, said(out.stderr)) == (0, []), out.stderr


# -- 5. a plain moto_server: no IAM simulation --------------------------------------------------------

PLAIN_SERVER = """
import sys
from moto.server import ThreadedMotoServer
server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
server.start()
print("http://%s:%d" % server.get_host_and_port(), flush=True)
sys.stdin.read()
server.stop()
"""


@pytest.fixture(scope="module")
def plain_endpoint():
    """moto_server exactly as moto ships it, in its own process (no emulator patch can reach it)."""
    proc = subprocess.Popen([sys.executable, "-c", PLAIN_SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    try:
        yield proc.stdout.readline().strip()
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)


@pytest.fixture
def plain_server_env(plain_endpoint, monkeypatch, tmp_path):
    import urllib.request

    urllib.request.urlopen(urllib.request.Request(f"{plain_endpoint}/moto-api/reset", method="POST"),
                           timeout=10).read()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SMP_LAUNCH_")}
    env.update(emulator.server_env(plain_endpoint), XDG_STATE_HOME=str(tmp_path / "state"),
               AWS_EC2_METADATA_DISABLED="true")
    for k, v in emulator.server_env(plain_endpoint).items():
        monkeypatch.setenv(k, v)
    create_world(boto3.Session(region_name=REGION))
    return env


def test_check_role_on_a_plain_moto_server_cannot_tell(plain_server_env):
    out = cli(plain_server_env, "check-role", "jobs/llama7b.yaml", "--set", "role=Good")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()  # the verdict is the command's output: stdout, whatever it is
    assert lines[0] == "role arn:aws:iam::123456789012:role/Good: unknown"
    assert any("cannot tell: IAM did not simulate the role's permissions" in ln for ln in lines)
    assert "<" not in out.stdout + out.stderr and "Traceback" not in out.stderr


def test_dry_run_on_a_plain_moto_server_warns_and_goes_on(plain_server_env):
    out = cli(plain_server_env, "submit", "jobs/llama7b.yaml", "--set", "role=Good", "--dry-run")
    assert out.returncode == 0, out.stderr
    assert "dry run: would start llama2-7b-" in out.stdout and "role:    arn:aws:iam" in out.stdout
    assert said(out.stderr)[0].startswith("warning: role check: cannot tell: ") and "<" not in out.stderr


def test_a_sweep_says_a_shared_role_warning_once(plain_server_env):
    out = cli(plain_server_env, "submit", "jobs/llama7b.yaml", "--set", "role=Good", "--dry-run",
              "--sweep", "training.batch_size=1,2,4")
    assert out.returncode == 0, out.stderr
    assert "3 plans: 3 would start" in out.stdout
    warnings = [ln for ln in said(out.stderr) if ln.startswith("warning: role check: cannot tell: ")]
    assert len(warnings) == len(set(warnings)) >= 1


def test_render_as_a_fresh_process_writes_the_source_dir_it_reports(tmp_path):
    """The README's `render` runs in-process in tests/test_readme_commands.py; here as the installed CLI."""
    out = subprocess.run([SMP, "render", "jobs/llama7b.yaml", "--out", str(tmp_path / "src"), "--output", "json"],
                         cwd=REPO, env={**os.environ, "NO_COLOR": "1"}, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stderr == "", out.stderr
    report = json.loads(out.stdout)
    assert report["directory"] == str(tmp_path / "src") and "train.py" in report["files"]
    assert sorted(p.name for p in (tmp_path / "src").iterdir()) == report["files"]
