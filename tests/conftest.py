import os
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
JOBS = REPO / "jobs"


@dataclass
class Result:
    code: int
    out: str
    err: str


@pytest.fixture
def run_cli(capsys, monkeypatch):
    """Run `smp-launch ARGS` in-process through the real entry point (main), capturing its streams."""

    def run(*args: str, env: dict | None = None) -> Result:
        from launcher.cli import main

        for k, v in (env or {}).items():
            monkeypatch.setenv(k, v)
        capsys.readouterr()
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


@pytest.fixture
def write_spec(tmp_path):
    """Write a spec file (dedented) under tmp_path and return its path."""

    def write(text: str, name: str = "job.yaml") -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))
        return path

    return write


MINIMAL = """
name: demo
model:
  preset: llama2-7b
cluster:
  region: us-west-2
output:
  path: s3://my-bucket/smp
"""


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for var in ("SMP_LAUNCH_ROLE", "AWS_ENDPOINT_URL", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-west-2")
    monkeypatch.delenv("AWS_REGION", raising=False)
    yield


@pytest.fixture(autouse=True)
def _state_home(tmp_path_factory, monkeypatch):
    """`submit` records the latest job and `JOB=latest` reads it: never in the real ~/.local/state."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))


@pytest.fixture
def aws(monkeypatch):
    """moto in-process with the emulator's patches, a bucket and the test roles (tests/aws_setup.py)."""
    from types import SimpleNamespace

    import boto3

    import emulator
    from tests.aws_setup import create_world

    for k, v in emulator.FAKE_CREDENTIALS.items():
        monkeypatch.setenv(k, v)
    with emulator.mocked():
        session = boto3.Session(region_name="us-west-2")
        yield SimpleNamespace(session=session, arns=create_world(session))


@pytest.fixture
def clock():
    """A virtual clock driving every emulated job (tests.emulation.VirtualClock)."""
    import emulator
    from tests.emulation import VirtualClock

    c = VirtualClock()
    emulator.set_clock(c)
    yield c
    emulator.set_clock(None)


def pytest_configure(config):
    os.environ.setdefault("SAGEMAKER_SUPPRESS_V2_WARNING", "1")
    sys.dont_write_bytecode = True
