"""What the job commands print, byte for byte, table and `--output json`: `status`, `list`, `wait`, `stop`,
`logs --no-follow`, `metrics`, `prices`, a sweep's dry run and `pipeline --dry-run`.

A check of a substring lets a table lose a column, a row its figure or a line its label unnoticed; these hold
each command's whole stdout (and its stderr where that is where the command speaks) against a file in
tests/output_goldens/, rewritten by `make goldens` (SMP_WRITE_GOLDENS=1): review the diff, then commit it.

Nothing here depends on when or where it runs. The emulated jobs all ran at T0 (November 2023) on a virtual
clock, long before the CLI's own clock: each has ended or sits in the phase the clock left it in, and every
time printed is T0's (in UTC, whatever the machine's zone). Prices come from the shipped snapshot
(XDG_STATE_HOME is empty) or a price written into the cache here. Masked, as in tests/test_plan_goldens.py:
the timestamp in a planned job's name and the git commit tag; and moto's log event ids (MASKS below).
"""
import functools
import json
import random
import re

import pytest

import emulator
import launcher.jobs.logs
from emulator import failures as scenarios
from launcher.core.names import GIT_COMMIT_TAG
from launcher.jobs.ratelimit import RateLimiter
from tests.conftest import REPO
from tests.emulation import VirtualClock
from tests.test_pipeline import PIPELINE_ROLE, pipeline_world
from tests.test_plan_goldens import STAMP, check_golden

GOLDENS = REPO / "tests" / "output_goldens"
T0 = 1_700_000_000.0  # 2023-11-14 22:13:20 UTC
# What differs from run to run, and what stands in for it: a planned job's name ends in its creation time
# (-YYYYMMDD-HHMMSS-mmm); a request's tags end with the commit smp-launch runs from, left out (a checkout that is
# not a git repo has no such tag); and moto numbers log events
# with one counter for the whole test process, so a line's event_id depends on the tests that ran before.
MASKS = ((STAMP, "-<time>"),
         (re.compile(r',\s*\{\s*"Key": "' + re.escape(GIT_COMMIT_TAG) + r'",\s*"Value": "[^"]*"\s*\}'), ""),
         (re.compile(r'"event_id": "\d+"'), '"event_id": "<id>"'))
ENV = {"AWS_REGION": "us-west-2", "COLUMNS": "100"}


def masked(text: str) -> str:
    for pattern, stand_in in MASKS:
        text = pattern.sub(stand_in, text)
    return text


def check(name: str, text: str) -> None:
    """`text` is the golden `name` (written first under SMP_WRITE_GOLDENS=1)."""
    check_golden(GOLDENS / name, text)


def check_run(result, name: str, code: int, stderr: bool = False) -> None:
    """The command exited `code` and printed golden `name` on stdout (and, with `stderr`, `name.stderr`; without,
    nothing on stderr)."""
    assert result.code == code, result.err
    check(name, masked(result.out))
    if stderr:
        check(name + ".stderr", masked(result.err))
    else:
        assert result.err == ""


@pytest.fixture
def make_world():
    return pipeline_world  # `pipeline` runs its steps under a role that may run a pipeline's jobs


@pytest.fixture
def ended(moto_world, monkeypatch):
    """Five emulated jobs of this tool, created a minute apart from T0, the clock left at T0 + 10 minutes:
    g-done (3 hosts, Completed), g-oom (Failed: a GPU out of memory), g-cap (Failed: no capacity, while
    Starting), g-stop (Stopped 40 s after it was created) and g-run (InProgress, Training). Returns the clock."""
    clock = VirtualClock(T0)
    emulator.set_clock(clock)
    sm = moto_world.sagemaker
    jobs = [emulator.EmulatedJob("g-done", hosts=3, training=300, line_interval=60.0, metric_interval=30.0,
                                 decoy=False),
            emulator.EmulatedJob("g-oom", **scenarios.out_of_memory(training=30, line_interval=10.0, decoy=False)),
            emulator.EmulatedJob("g-cap", **scenarios.capacity_failure()),
            emulator.EmulatedJob("g-stop", training=600, stop_after=40, decoy=False),
            emulator.EmulatedJob("g-run", hosts=4, instance_type="ml.p5.48xlarge", training=3600, decoy=False)]
    try:
        for job in jobs:
            emulator.add_job(job, sm)
            clock.t += 60
        clock.t = T0 + 600
        for k, v in ENV.items():
            monkeypatch.setenv(k, v)
        yield clock
    finally:
        emulator.set_clock(None)


# -- jobs: status, list, wait, stop, logs, metrics ---------------------------------------------------------

STATUS = {"done": ("g-done", 0), "failed": ("g-oom", 1), "capacity": ("g-cap", 1), "stopped": ("g-stop", 5),
          "running": ("g-run", 0)}


@pytest.mark.parametrize("case", sorted(STATUS))
def test_status_matches_its_golden(case, ended, run_cli):
    job, code = STATUS[case]
    check_run(run_cli("status", job), f"status-{case}.txt", code)
    check_run(run_cli("status", job, "--output", "json"), f"status-{case}.json", code)


def test_list_matches_its_golden(ended, run_cli):
    check_run(run_cli("list"), "list.txt", 0)
    check_run(run_cli("list", "--output", "json"), "list.json", 0)
    check_run(run_cli("list", "--running", "--name-contains", "g-"), "list-running.txt", 0)


def test_wait_on_ended_jobs_matches_its_golden(ended, run_cli):
    names = ("g-done", "g-oom", "g-cap", "g-stop")
    check_run(run_cli("wait", *names), "wait.txt", 1)
    check_run(run_cli("wait", *names, "--output", "json"), "wait.json", 1)


def test_stop_matches_its_golden(ended, run_cli):
    check_run(run_cli("stop", "g-run", "--yes"), "stop.txt", 0, stderr=True)
    check_run(run_cli("stop", "g-done", "--yes", "--output", "json"), "stop-ended.json", 0)


def test_logs_of_ended_jobs_match_their_golden(ended, run_cli, monkeypatch):
    check_run(run_cli("logs", "g-done", "--no-follow"), "logs-done.txt", 0)
    check_run(run_cli("logs", "g-done", "--no-follow", "--output", "json"), "logs-done.json", 0)
    with monkeypatch.context() as patch:  # followed to its end, the follower's polls and waits on the clock
        patch.setattr(launcher.jobs.logs, "Polling", functools.partial(
            launcher.jobs.logs.Polling, clock=ended, sleep=ended.sleep, rng=random.Random(1),
            limiter=RateLimiter(2.0, clock=ended, sleep=ended.sleep)))
        check_run(run_cli("logs", "g-oom", "--host", "1"), "logs-failed-host1.txt", 1, stderr=True)
    # two jobs are read at once, each on its own thread: each job's lines keep their order, but how the two
    # interleave depends on the threads, so the golden holds them grouped by job (a stable sort on the label)
    both = run_cli("logs", "g-done", "g-oom", "--no-follow", "--grep", "step=[12] |worker up")
    both.out = "".join(sorted(both.out.splitlines(True), key=lambda line: line.split("/", 1)[0]))
    check_run(both, "logs-two-jobs.txt", 0)


def test_metrics_of_an_ended_job_match_their_golden(ended, run_cli):
    check_run(run_cli("metrics", "g-done", "--since", "1d"), "metrics-done.txt", 0)
    check_run(run_cli("metrics", "g-done", "--since", "1d", "--output", "json"), "metrics-done.json", 0)


# -- prices, a sweep's dry run, a pipeline's dry run -----------------------------------------------------

def test_prices_match_their_golden(run_cli, tmp_path, monkeypatch):
    env = {"XDG_STATE_HOME": str(tmp_path / "state"), "AWS_REGION": "us-east-1", "COLUMNS": "100"}
    check_run(run_cli("prices", env=env), "prices.txt", 0)
    check_run(run_cli("prices", "ml.p4d.24xlarge", "ml.p5.48xlarge", "ml.x9.unknown", "--output", "json", env=env),
              "prices.json", 0)


SWEEP = ["jobs/llama7b.yaml", "--set", "role=Good", "--set", "smp.hybrid_shard_degree=0",
         "--sweep", "smp.tensor_parallel_degree=1,2,3", "--sweep", "training.batch_size=2,4,64", "--dry-run"]


def test_a_sweeps_dry_run_matches_its_golden(moto_world, run_cli, tmp_path, monkeypatch):
    from launcher.catalog.prices import Price, price_key, write_cache

    monkeypatch.chdir(REPO)  # the spec files are named as given: relative, the same in every checkout
    env = {**ENV, "XDG_STATE_HOME": str(tmp_path / "state")}
    # a fetched price in the cache (the snapshot has none for us-west-2): the cost column has figures
    write_cache({price_key("ml.p4d.24xlarge", "us-west-2", spot=False): Price(31.5, "AWS Price List API",
                                                                              "2026-11-30")}, env)
    check_run(run_cli("submit", *SWEEP, env=env), "sweep-dry-run.txt", 0, stderr=True)
    small = ["jobs/llama7b.yaml", "--set", "role=Good", "--sweep", "training.batch_size=2,64", "--dry-run"]
    result = run_cli("submit", *small, "--output", "json", env=env)
    check_run(result, "sweep-dry-run.json", 0, stderr=True)


def test_a_pipelines_dry_run_matches_its_golden(moto_world, run_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    env = {**ENV, "XDG_STATE_HOME": str(tmp_path / "state")}
    spec = "jobs/llama7b.yaml"
    result = run_cli("pipeline", spec, spec, "--name", "golden", "--dry-run", "--set", f"role={PIPELINE_ROLE}",
                     "--skip-role-check", env=env)
    check_run(result, "pipeline-dry-run.json", 0, stderr=True)
    json.loads(result.out)


def test_every_output_golden_belongs_to_a_case():
    made = {f"status-{c}.{x}" for c in STATUS for x in ("txt", "json")} | {
        "list.txt", "list.json", "list-running.txt", "wait.txt", "wait.json", "stop.txt", "stop.txt.stderr",
        "stop-ended.json", "logs-done.txt", "logs-done.json", "logs-failed-host1.txt", "logs-failed-host1.txt.stderr",
        "logs-two-jobs.txt", "metrics-done.txt", "metrics-done.json", "prices.txt", "prices.json",
        "sweep-dry-run.txt", "sweep-dry-run.txt.stderr", "sweep-dry-run.json", "sweep-dry-run.json.stderr",
        "pipeline-dry-run.json", "pipeline-dry-run.json.stderr"}
    assert {p.name for p in GOLDENS.iterdir()} == made, "a stale or missing output golden: run `make goldens`"
