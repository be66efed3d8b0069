"""Shared fixtures, and the one place that sorts every test into a kind (see README, "Tests").

Kinds (markers registered in pyproject.toml; `make test-unit`, `make test-e2e`, `make test-local`):
  local  the test module's name contains "local": CPU training runs under torchrun (the `local` extra);
  e2e    the module's name contains "e2e", the module is in E2E_MODULES, or the test uses the
         per-worker `moto_server` fixture: the installed CLI as a subprocess against a moto server;
  unit   everything else: a new test with no marker is a unit test, so no one has to remember to mark it.
A test or module marked by hand with one of these keeps that mark. Tests run in parallel
(`pytest -n N --dist loadgroup`): a module whose tests share an expensive module-scoped fixture is
listed in ONE_WORKER_MODULES, and the scheduler below gives all of it to one worker (which builds the
fixture once, or runs the torchrun tests in turn).
"""
import gc
import os
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
JOBS = REPO / "jobs"

# The SageMaker SDK line this suite runs on (`make test` runs it on 2.x, and the SDK-facing modules again on 3.x:
# SDK3_TEST_MODULES), and the backends that line has.
from launcher.core.sdk import BackendKind, installed_sdk  # noqa: E402

SDK_MAJOR = installed_sdk().major or 0
BACKENDS = ((BackendKind.ESTIMATOR, BackendKind.MODEL_TRAINER) if SDK_MAJOR == 2 else (BackendKind.MODEL_TRAINER,))
needs_v2 = pytest.mark.skipif(SDK_MAJOR != 2, reason="the PyTorch Estimator is SageMaker SDK 2.x's")
# Where the SDK keeps its telemetry module on this line (tests silence or watch it).
TELEMETRY = "sagemaker.telemetry.telemetry_logging" if SDK_MAJOR == 2 else "sagemaker.core.telemetry.telemetry_logging"


@dataclass
class Result:
    code: int
    out: str
    err: str


def call_main(args, capsys) -> Result:
    """`smp-launch ARGS` through the console script's entry point (main) in this process: its exit code and
    what it wrote, as a shell would see them."""
    from launcher.cli import main

    capsys.readouterr()
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    captured = capsys.readouterr()
    return Result(code, captured.out, captured.err)


def plan_rows(text: str) -> dict[str, str]:
    """`plan`'s table as {row: value}: a value folded onto the next lines (an empty first cell) is joined back,
    its pieces a space apart (the table folds at spaces where it can)."""
    rows: dict[str, str] = {}
    key = None
    for line in text.splitlines():
        if line.count("│") != 3:
            continue
        cells = [c.strip() for c in line.split("│")[1:3]]
        if cells[0]:
            key = cells[0]
            rows[key] = cells[1]
        elif key is not None:
            rows[key] += " " + cells[1]
    return rows


@pytest.fixture
def run_cli(capsys, monkeypatch):
    """Run `smp-launch ARGS` in-process through the real entry point (main), capturing its streams."""

    def run(*args: str, env: dict | None = None) -> Result:
        for k, v in (env or {}).items():
            monkeypatch.setenv(k, v)
        return call_main(args, capsys)

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
    # COLUMNS too: a test worker inherits one (pytest-xdist's workers get 80), and a table that is not on a terminal
    # folds to it; without it, to the 100 columns every run sees alike.
    for var in ("SMP_LAUNCH_ROLE", "AWS_ENDPOINT_URL", "AWS_PROFILE", "COLUMNS", "LINES"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-west-2")
    monkeypatch.delenv("AWS_REGION", raising=False)
    yield


@pytest.fixture(autouse=True)
def _no_wait_notices(request, monkeypatch):
    """An AWS call with no answer after WAIT_NOTICE_S seconds prints "waiting for <service>…" on stderr. On a
    loaded machine an in-process moto call can take that long, and the notice would land in the stderr a test
    compares; so in-process calls never reach the notice here. A test of the notice sets its own delay
    (`wait_notice_s`, or WAIT_NOTICE_S patched); one that reads the shipped value asks for `shipped_wait_notice`."""
    if "shipped_wait_notice" in request.fixturenames:
        return
    from launcher.core import aws

    monkeypatch.setattr(aws, "WAIT_NOTICE_S", 1e6)


@pytest.fixture
def shipped_wait_notice():
    """The WAIT_NOTICE_S the tool ships (`_no_wait_notices` leaves it alone for this test)."""
    from launcher.core import aws

    return aws.WAIT_NOTICE_S


@pytest.fixture(autouse=True)
def _state_home(tmp_path_factory, monkeypatch):
    """`submit` records the latest job and `JOB=latest` reads it: never in the real ~/.local/state."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))


@pytest.fixture
def server_cli(moto_server, monkeypatch, tmp_path):
    """The worker's moto server, reset, with the environment pointing at it, and `cli(*args)`: the installed
    smp-launch run there as a subprocess (no SMP_LAUNCH_* of the caller's, its state under tmp_path)."""
    import subprocess
    from types import SimpleNamespace

    import boto3

    import emulator

    emulator.reset_server(moto_server)
    for k, v in emulator.server_env(moto_server).items():
        monkeypatch.setenv(k, v)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SMP_LAUNCH_")}
    env.update(XDG_STATE_HOME=str(tmp_path / "state"), AWS_EC2_METADATA_DISABLED="true")
    smp = str(Path(sys.executable).parent / "smp-launch")

    def cli(*args: str, cwd: Path = REPO, timeout: float = 180,
            extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([smp, *args], cwd=cwd, env={**env, **(extra_env or {})}, capture_output=True,
                              text=True, timeout=timeout)

    return SimpleNamespace(url=moto_server, env=env, cli=cli, session=boto3.Session(region_name="us-west-2"))


@pytest.fixture
def server_world(server_cli, make_world):
    """`server_cli`'s namespace (url, env, cli, session) with `make_world` built on the server: `arns` its roles'
    ARNs. Emulated jobs scripted by the test are forgotten after it."""
    from types import SimpleNamespace

    from emulator import scenario

    yield SimpleNamespace(**vars(server_cli), arns=make_world(server_cli.session))
    scenario.forget_all()


@pytest.fixture
def make_world():
    """What `moto_world` and `server_world` build in the emulated account: a function of a boto3 Session that
    returns the roles' ARNs (a module overrides it for a world of its own)."""
    from tests.aws_setup import create_world

    return create_world


@pytest.fixture
def moto_world(monkeypatch, make_world):
    """moto in-process with the emulator's patches, and `make_world` built there (by default a bucket and the test
    roles, tests/aws_setup.py): `session`, `arns` (the roles' ARNs) and `sagemaker` (a client)."""
    from types import SimpleNamespace

    import boto3

    import emulator

    for k, v in emulator.FAKE_CREDENTIALS.items():
        monkeypatch.setenv(k, v)
    with emulator.mocked():
        session = boto3.Session(region_name="us-west-2")
        yield SimpleNamespace(session=session, arns=make_world(session), sagemaker=session.client("sagemaker"))


@pytest.fixture
def jobs_world():
    """moto in-process holding one eight-host job that ended an hour ago ("eight"); its SageMaker client."""
    import boto3

    import emulator
    from tests.emulation import started_ago

    with emulator.mocked():
        sm = boto3.client("sagemaker", region_name="us-west-2")
        started_ago(sm, 3600, emulator.EmulatedJob("eight", hosts=8, training=60, decoy=False))
        yield sm
    emulator.set_clock(None)


@pytest.fixture
def clock():
    """A virtual clock driving every emulated job (tests.emulation.VirtualClock)."""
    import emulator
    from tests.emulation import VirtualClock

    c = VirtualClock()
    emulator.set_clock(c)
    yield c
    emulator.set_clock(None)


@pytest.fixture(scope="session")
def moto_server():
    """One patched moto server (ThreadedMotoServer on 127.0.0.1, port 0) per test process (xdist worker).

    Each test that uses it starts with `emulator.reset_server(url)`, so tests share the process, never state."""
    import emulator

    with emulator.server() as url:
        yield url


KINDS = ("unit", "e2e", "local")
E2E_MODULES = {"test_reliability_short"}  # the real CLI through a fault proxy in front of moto
E2E_FIXTURES = {"moto_server"}
# Modules one worker runs whole. test_tensor_parallel_local builds one 4-rank fixture for all its tests.
# test_local_run's training runs (2-4 torchrun ranks each) are half the suite's CPU: spread over every worker,
# each worker imported torch and transformers and up to 10 ranks shared 2 cores; on one worker they run in
# turn, and the other workers' tests, which wait on subprocesses and clocks, run in the gaps between them.
ONE_WORKER_MODULES = {"test_tensor_parallel_local", "test_local_run"}
RUN_FIRST = ("local", "e2e", "unit")  # the longest tests start first, so no worker is left with one at the end


def kind_of(item: pytest.Item) -> str:
    """The test's kind: its own marker, else by its module's name or the fixtures it uses, else unit."""
    marked = [m.name for m in item.iter_markers() if m.name in KINDS]
    if marked:
        return marked[0]
    module = _module(item)
    if "local" in module:
        return "local"
    if "e2e" in module or module in E2E_MODULES or E2E_FIXTURES & set(getattr(item, "fixturenames", ())):
        return "e2e"
    return "unit"


def _module(item: pytest.Item) -> str:
    return item.module.__name__.rsplit(".", 1)[-1] if getattr(item, "module", None) else ""


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects
def pytest_collection_modifyitems(config, items):
    kinds = {}
    for item in items:
        kind = kinds[id(item)] = kind_of(item)
        if not item.get_closest_marker(kind):
            item.add_marker(getattr(pytest.mark, kind))
    # Stable sort: within a kind, collection order is kept (every xdist worker computes the same order).
    items.sort(key=lambda item: (RUN_FIRST.index(kinds[id(item)]), _module(item) not in ONE_WORKER_MODULES))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadgroup`, where a module in ONE_WORKER_MODULES is one group: one worker runs all its tests.

    Done here, not by `xdist_group` marks: xdist 3.8 groups by rewriting `item._nodeid`, which pytest 9.2
    does not read, so those marks group nothing (each worker then built the 4-rank fixture itself)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class SharedFixtureModules(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return path if Path(path).stem in ONE_WORKER_MODULES else super()._split_scope(nodeid)

    return SharedFixtureModules(config, log)


def _one_parse_of_each_aws_model() -> None:
    """Sessions in a test process share botocore's loader, so each AWS service model is parsed once per process.

    Tests make a new Session nearly every time (each moto world, each `Clients`), and each new Session
    re-parsed the JSON models (sagemaker's alone is megabytes): a third of an in-process test's time. A
    Session already shares one loader among all its clients; this shares it among Sessions, keyed by
    data path. Subprocesses (the e2e CLI) are untouched."""
    import functools

    import botocore.session

    if not hasattr(botocore.session.create_loader, "cache_info"):
        botocore.session.create_loader = functools.lru_cache(maxsize=None)(botocore.session.create_loader)


def pytest_configure(config):
    os.environ.setdefault("SAGEMAKER_SUPPRESS_V2_WARNING", "1")
    # One torch thread per process, as torchrun gives each rank: tests run in parallel and spawn ranks, and
    # torch's default (a thread per core in every process) spent CPU spinning for cores others held.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.dont_write_bytecode = True
    # The CLI subprocesses (a few hundred per run) may cache this repository's bytecode in __pycache__
    # (git-ignored): where the environment sets PYTHONDONTWRITEBYTECODE (this machine does), each one compiled
    # launcher/ anew, about 0.1 CPU-s a process.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    _one_parse_of_each_aws_model()
    # Python's cyclic collector ran every 700 allocations over everything moto, botocore, pydantic and the
    # collected tests hold: a fifth of the in-process tests' CPU. Rarer young collections here, and
    # pytest_collection_finish freezes what collection built, so full collections skip it.
    gc.set_threshold(50_000, 20, 20)


def pytest_collection_finish(session):
    gc.freeze()


def refusing(clients, operation: str, code: str = "AccessDeniedException"):
    """`clients` whose `operation` ("sns.GetTopicAttributes") fails with `code` as an AWS answer would: raised
    at before-send, so botocore's own deadline timer for the call is already stopped."""
    from botocore.exceptions import ClientError

    def refuse(**_kw):
        raise ClientError({"Error": {"Code": code, "Message": "no"}, "ResponseMetadata": {"HTTPStatusCode": 403}},
                          operation.rsplit(".", 1)[-1])

    clients.session.events.register(f"before-send.{operation}", refuse)
    return clients


@pytest.fixture(autouse=True)
def _emulated_jobs_behave_as_by_default():
    """Each test starts with the emulator's own default job (some set another, or moto's instant Completed,
    and a later test in the same worker would inherit it)."""
    yield
    import emulator

    emulator.set_default({})


def ctrl_c_as_a_terminal_has_it():
    """For a child process: SIGINT back to its default, as a shell started from a terminal gives it; a test
    suite started in the background (nohup, `&`, some CI runners) inherits SIGINT ignored, and a Ctrl-C sent
    to the child would do nothing."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture
def ctrl_c_reaches_python():
    """SIGINT raising KeyboardInterrupt in this process for the test, whatever the suite was started with."""
    import signal

    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)
