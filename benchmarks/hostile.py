"""The reliability report's scenarios of more than one command: a world made hostile before the CLI runs (another's
object at the source tarball's key, a job smp-launch did not start), two processes at once, a sweep cut short and
run again. Each runs the installed `smp-launch` as benchmarks/reliability.py does (a subprocess against the moto
server, through the fault proxy) and returns one report row; `scenarios(rel)` lists them, `rel` being the
reliability module (its Scenario, Row, World helpers and the CLI's environment).
"""
from __future__ import annotations

import functools
import json
import signal
import subprocess
import tempfile
import time
from typing import Any

SPEC = "jobs/llama7b.yaml"
# a Hugging Face token's shape (https://huggingface.co/docs/hub/security-tokens)
HF_TOKEN = "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"
SEEDS = "training.seed=1,2,3,4"
SWEEP_PLANS = 4


class Run:
    """One command's outcome."""

    def __init__(self, code: int | str, out: str, err: str, wall: float, taken: list[str], faults: dict[str, int]):
        self.code, self.out, self.err, self.wall, self.taken, self.faults = code, out, err, wall, taken, faults

    def json(self) -> Any:
        try:
            return json.loads(self.out)
        except ValueError:
            return None


def _popen(rel: Any, args: list[str], url: str, state: str) -> subprocess.Popen:
    return subprocess.Popen([rel.EXE, *args], cwd=rel.REPO, env=rel._cli_env(url, state), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True, preexec_fn=rel._default_sigint)


def cli(rel: Any, world: Any, args: list[str], state: str, rules: list[Any] | None = None,
        interrupt: bool = False) -> Run:
    """`smp-launch ARGS` through a fresh fault proxy with `rules`; with `interrupt`, SIGINT once a call is held."""
    import os

    with rel.FaultProxy(world.url, list(rules or [])) as proxy:
        t0 = time.monotonic()
        proc = _popen(rel, args, proxy.url, state)
        if interrupt and proxy.held.wait(timeout=rel.KILL_AFTER_S):
            time.sleep(0.3)
            proc.send_signal(signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=rel.KILL_AFTER_S)
            code: int | str = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            code = f"killed after {rel.KILL_AFTER_S:.0f} s"
        return Run(code, out, err, time.monotonic() - t0, list(proxy.taken), dict(proxy.faults()))


def _common(run: Run, problems: list[str], expect: int | None) -> None:
    text = run.out + run.err
    if "Traceback" in text:
        problems.append("traceback")
    if expect is not None and run.code != expect:
        problems.append(f"exit {run.code}, not {expect}")


def _faults(*runs: Run, extra: str = "") -> str:
    fired: dict[str, int] = {}
    for r in runs:
        for k, n in r.faults.items():
            fired[k] = fired.get(k, 0) + n
    shown = "; ".join(f"{n}x {k}" for k, n in sorted(fired.items()))
    return "; ".join(x for x in (extra, shown) if x) or "none"


def _sweep_jobs(run: Run) -> list[str]:
    """The jobs a sweep's JSON says this run started."""
    data = run.json() or []
    return [name for d in data if isinstance(d, dict) and d.get("state") == "started" for name in d.get("jobs", [])]


# -- the scenarios ------------------------------------------------------------------------------------------------

def squatted_source(rel: Any, world: Any, sc: Any) -> Any:
    """Another's object at the plan's tarball key: the job runs the plan's own tarball, the object is left alone."""
    from launcher.api import build_plan, load_spec
    from launcher.jobs.stored import submit_directory
    from launcher.render.source import split_s3

    world.reset()
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="smp-rel-") as state:
        env = rel._cli_env(world.url, state)
        plan = build_plan(load_spec(str(rel.REPO / SPEC), ["role=Good"], env=env), env=env, region="us-west-2")
        bucket, key = split_s3(plan.source.uri)
        s3 = world.client("s3")
        other = b"#!/bin/sh\necho not the plan's source\n"
        s3.put_object(Bucket=bucket, Key=key, Body=other)
        run = cli(rel, world, ["submit", SPEC, "--set", "role=Good"], state)
    _common(run, problems, 0)
    names = world.jobs()
    said = set(rel.STARTED.findall(run.out))
    if len(names) != 1 or said != set(names):
        problems.append(f"jobs {sorted(names)}, reported {sorted(said)}")
    for name in names:
        uri = submit_directory(world.client("sagemaker").describe_training_job(TrainingJobName=name)) or ""
        b, k = split_s3(uri)
        if not uri or s3.get_object(Bucket=b, Key=k)["Body"].read() != plan.source.tarball:
            problems.append(f"{name} runs a tarball that is not the plan's ({uri})")
    if s3.get_object(Bucket=bucket, Key=key)["Body"].read() != other:
        problems.append("another's object was overwritten")
    return rel.Row(sc.name, _faults(run, extra="another's object at the tarball's key"), run.code, len(names),
                   len(said), "-", "-", round(run.wall, 1), problems)


def sweep_names_taken(rel: Any, world: Any, sc: Any) -> Any:
    """A sweep whose first two names another process takes just before: every plan starts, none under a name taken."""
    world.reset()
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="smp-rel-") as state:
        run = cli(rel, world, ["submit", SPEC, "--set", "role=Good", "--sweep", SEEDS, "--max-concurrent", "9",
                               "--output", "json"], state, sc.rules)
    _common(run, problems, 0)
    names, said, others = set(world.jobs()), set(_sweep_jobs(run)), set(run.taken)
    if len(said) != SWEEP_PLANS:
        problems.append(f"{len(said)} of {SWEEP_PLANS} plans started")
    if said & others:
        problems.append(f"reported another's job: {sorted(said & others)}")
    if names != said | others:
        problems.append(f"jobs not accounted for: {sorted(names - said - others)}")
    return rel.Row(sc.name, _faults(run), run.code, len(names), len(said), "-", "-", round(run.wall, 1), problems)


def two_sweeps_together(rel: Any, world: Any, sc: Any) -> Any:
    """Two processes on one machine start the same sweep at once: each starts every plan, no job is reported twice."""
    world.reset()
    problems: list[str] = []
    args = ["submit", SPEC, "--set", "role=Good", "--sweep", SEEDS, "--max-concurrent", "9", "--output", "json"]
    with tempfile.TemporaryDirectory(prefix="smp-rel-") as state, rel.FaultProxy(world.url, []) as proxy:
        t0 = time.monotonic()
        procs = [_popen(rel, args, proxy.url, state) for _ in range(2)]
        runs = []
        for proc in procs:
            out, err = proc.communicate(timeout=rel.KILL_AFTER_S)
            runs.append(Run(proc.returncode, out, err, time.monotonic() - t0, [], {}))
    for run in runs:
        _common(run, problems, 0)
    a, b = (set(_sweep_jobs(r)) for r in runs)
    names = set(world.jobs())
    if len(a) != SWEEP_PLANS or len(b) != SWEEP_PLANS:
        problems.append(f"started {len(a)} and {len(b)} of {SWEEP_PLANS} plans")
    if a & b:
        problems.append(f"both reported {sorted(a & b)}")
    if names != a | b:
        problems.append(f"jobs not reported: {sorted(names - a - b)}")
    wall = max(r.wall for r in runs)
    codes = "/".join(str(r.code) for r in runs)
    return rel.Row(sc.name, "none (two processes)", codes, len(names), len(a) + len(b), "-", "-", round(wall, 1),
                   problems)


def sweep_cut_short(rel: Any, world: Any, sc: Any) -> Any:
    """Ctrl-C while a sweep's third CreateTrainingJob is held, then the same sweep again: no plan starts twice."""
    world.reset()
    problems: list[str] = []
    args = ["submit", SPEC, "--set", "role=Good", "--sweep", SEEDS, "--max-concurrent", "9", "--output", "json"]
    with tempfile.TemporaryDirectory(prefix="smp-rel-") as state:
        first = cli(rel, world, args, state, sc.rules, interrupt=True)
        again = cli(rel, world, args, state)
    _common(first, problems, 130)
    _common(again, problems, 0)
    names = set(world.jobs())
    before, after = set(_sweep_jobs(first)), set(_sweep_jobs(again))
    skipped = [d for d in again.json() or [] if isinstance(d, dict) and d.get("state") == "skipped"]
    if len(names) != SWEEP_PLANS:
        problems.append(f"{len(names)} jobs for {SWEEP_PLANS} plans")
    if before & after or names != before | after:
        problems.append(f"started {sorted(before)}, then {sorted(after)}, jobs {sorted(names)}")
    if len(skipped) != len(before):
        problems.append(f"the second run skipped {len(skipped)} plans, the first started {len(before)}")
    return rel.Row(sc.name, _faults(first), f"{first.code}, then {again.code}", len(names),
                   f"{len(before)} + {len(after)}", "-", "-", round(first.wall + again.wall, 1), problems)


def stop_foreign(rel: Any, world: Any, sc: Any) -> Any:
    """`stop` of a running job smp-launch did not start: refused (exit 2) naming whose it is; `--foreign` stops it."""
    import emulator

    world.reset()
    problems: list[str] = []
    sm = world.client("sagemaker")
    emulator.add_job(emulator.EmulatedJob("rel-theirs", hosts=1, training=3600, decoy=False), sm, managed=False)
    with tempfile.TemporaryDirectory(prefix="smp-rel-") as state:
        refused = cli(rel, world, ["stop", "rel-theirs", "--yes"], state)
        status = sm.describe_training_job(TrainingJobName="rel-theirs")["TrainingJobStatus"]
        forced = cli(rel, world, ["stop", "rel-theirs", "--yes", "--foreign"], state)
    _common(refused, problems, 2)
    _common(forced, problems, 0)
    if status != "InProgress":
        problems.append(f"stopped without --foreign ({status})")
    if "not started by smp-launch" not in refused.err:
        problems.append("the refusal does not say whose job it is")
    after = sm.describe_training_job(TrainingJobName="rel-theirs")["TrainingJobStatus"]
    if after not in ("Stopping", "Stopped"):
        problems.append(f"--foreign did not stop it ({after})")
    return rel.Row(sc.name, "none (a job started by another tool)", f"{refused.code}, then {forced.code}", 1, "-",
                   "-", "-", round(refused.wall + forced.wall, 1), problems)


def sweep_secret(rel: Any, world: Any, sc: Any) -> Any:
    """A credential among a sweep's values: its plan is refused, the other starts, and the credential is printed
    nowhere (refusal line, table, JSON)."""
    world.reset()
    problems: list[str] = []
    sweep = f"hyperparameters.token={HF_TOKEN},plain"
    with tempfile.TemporaryDirectory(prefix="smp-rel-") as state:
        table = cli(rel, world, ["submit", SPEC, "--set", "role=Good", "--sweep", sweep, "--dry-run"], state)
        run = cli(rel, world, ["submit", SPEC, "--set", "role=Good", "--sweep", sweep, "--output", "json"], state)
    _common(table, problems, 0)
    _common(run, problems, 0)
    for r in (table, run):
        if HF_TOKEN in r.out + r.err or HF_TOKEN[:10] in r.out + r.err:
            problems.append("the credential was printed")
    names = world.jobs()
    said = _sweep_jobs(run)
    if len(names) != 1 or set(said) != set(names):
        problems.append(f"jobs {names}, reported {said}")
    return rel.Row(sc.name, "none (a credential as a --sweep value)", f"{table.code}, then {run.code}", len(names),
                   len(said), "-", "-", round(table.wall + run.wall, 1), problems)


def scenarios(rel: Any) -> list[Any]:
    sm, create = "sagemaker", "CreateTrainingJob"
    Scenario, Rule = rel.Scenario, rel.Rule

    def bound(runner: Any) -> Any:
        return functools.partial(runner, rel)
    return [
        Scenario("submit, the tarball's key holds another's object", "hostile", run=bound(squatted_source), short=True,
                 note="the job must run the plan's bytes, and the object must be left alone"),
        Scenario("submit --sweep of 4, the first two names taken by another just before", "hostile",
                 [Rule(sm, create, "taken", 2)], run=bound(sweep_names_taken), foreign=2),
        Scenario("two sweeps of one spec started together on one machine", "hostile", run=bound(two_sweeps_together)),
        Scenario("submit --sweep of 4, Ctrl-C while the third CreateTrainingJob is held, then the same sweep again",
                 "hostile", [Rule(sm, create, "hang", 1, after=2)], run=bound(sweep_cut_short)),
        Scenario("stop, a running job smp-launch did not start", "hostile", run=bound(stop_foreign), short=True),
        Scenario("submit --sweep, a credential among the values", "hostile", run=bound(sweep_secret)),
    ]

