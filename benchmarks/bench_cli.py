"""CLI wall time against the SageMaker SDK's own import, measured in the same run, interleaved.

Each round runs every command once, the anchor (`python -c "import sagemaker"`) included, in a
rotating order, so load from other processes falls on all rows alike; the first round only warms the
file cache and is dropped. `submit` and `submit --dry-run` run against the emulator (a moto server on
127.0.0.1 in this process) with an unchanged source: the tarball is uploaded once before timing, and
every timed submit is checked to have started a job without uploading.

Goals: `smp-launch --help` under 0.3 s; `plan` and `validate` under a quarter of the anchor; `submit`
within 1.25x of the anchor. `submit --dry-run` and `advise` are shown for reference.
"""
from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
RUNS = int(os.environ.get("BENCH_RUNS", "7"))
SPEC = "jobs/llama7b.yaml"


@dataclass
class Row:
    name: str
    cmd: list[str]
    goal: Callable[[float], float] | None = None  # the anchor's median -> goal in seconds
    check: Callable[[subprocess.CompletedProcess], str | None] | None = None
    times: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)


def submitted_without_upload(out: subprocess.CompletedProcess) -> str | None:
    """Why a timed submit does not count, or None: it must start a job and upload nothing."""
    try:
        result = json.loads(out.stdout)
    except ValueError:
        return f"exit {out.returncode}, not JSON: {out.stderr.strip()[-300:]}"
    if out.returncode != 0 or not result.get("job_name"):
        return f"exit {out.returncode}: {out.stderr.strip()[-300:]}"
    if result.get("uploaded"):
        return "the source was uploaded again (the source changed between runs?)"
    return None


def ok(out: subprocess.CompletedProcess) -> str | None:
    return None if out.returncode == 0 else f"exit {out.returncode}: {out.stderr.strip()[-300:]}"


@contextlib.contextmanager
def emulated_aws() -> Iterator[dict[str, str]]:
    """A moto server with the emulator, a bucket and roles; yields the environment for the CLI."""
    import boto3

    import emulator
    from tests.aws_setup import REGION, create_world

    with emulator.server() as url, tempfile.TemporaryDirectory() as state:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "SMP_LAUNCH_", "SAGEMAKER_"))}
        env.update(emulator.server_env(url, REGION), XDG_STATE_HOME=state, AWS_EC2_METADATA_DISABLED="true",
                   SAGEMAKER_SUPPRESS_V2_WARNING="1")
        session = boto3.Session(region_name=REGION, aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                                aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
                                aws_session_token=env.get("AWS_SESSION_TOKEN"))
        saved = os.environ.get("AWS_ENDPOINT_URL")
        os.environ["AWS_ENDPOINT_URL"] = url
        try:
            create_world(session)
        finally:
            if saved is None:
                os.environ.pop("AWS_ENDPOINT_URL", None)
            else:
                os.environ["AWS_ENDPOINT_URL"] = saved
        yield env


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(row: Row, env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and the command's own CPU seconds (the emulator's, in this process, excluded)."""
    c0, t0 = children_cpu(), time.perf_counter()
    out = subprocess.run(row.cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    elapsed, cpu = time.perf_counter() - t0, children_cpu() - c0
    problem = (row.check or ok)(out)
    if problem:
        raise SystemExit(f"{row.name}: {problem}")
    return elapsed, cpu


def main() -> None:
    exe = shutil.which("smp-launch", path=str(Path(sys.executable).parent)) or "smp-launch"
    jobs = sorted(str(p.relative_to(REPO)) for p in (REPO / "jobs").glob("*.yaml"))
    quarter = lambda anchor: anchor / 4  # noqa: E731
    rows = [
        Row("python -c 'import sagemaker' (anchor)", [sys.executable, "-c", "import sagemaker"]),
        Row("smp-launch --help", [exe, "--help"], lambda _: 0.3),
        Row(f"smp-launch plan {SPEC}", [exe, "plan", SPEC], quarter),
        Row("smp-launch plan --output json", [exe, "plan", SPEC, "--output", "json"], quarter),
        Row("smp-launch validate jobs/*.yaml", [exe, "validate", *jobs], quarter),
        Row("smp-launch advise --model llama2-13b", [exe, "advise", "--model", "llama2-13b",
                                                     "--global-batch-tokens", "4M"]),
        Row("smp-launch submit --dry-run", [exe, "submit", SPEC, "--set", "role=Good", "--dry-run"]),
        Row("smp-launch submit (source unchanged)", [exe, "submit", SPEC, "--set", "role=Good", "--output", "json"],
            lambda anchor: 1.25 * anchor, submitted_without_upload),
    ]
    with emulated_aws() as env:
        first = subprocess.run(rows[-1].cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
        if first.returncode != 0 or not json.loads(first.stdout).get("uploaded"):
            raise SystemExit(f"the first submit should upload the source: {first.stderr.strip()[-300:]}")
        for r in range(RUNS + 1):  # round 0 warms the file cache and is dropped
            shift = r % len(rows)
            for row in rows[shift:] + rows[:shift]:
                elapsed, cpu = run(row, env)
                if r:
                    row.times.append(elapsed)
                    row.cpu.append(cpu)
    anchor, anchor_cpu = statistics.median(rows[0].times), statistics.median(rows[0].cpu)
    print(f"wall seconds over {RUNS} interleaved rounds; {sys.platform}, Python {sys.version.split()[0]}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end")
    print("verdicts compare the median wall time with the goal; 'cpu x' is the median CPU time (user+sys) against")
    print("the anchor's, which a machine shared with other work distorts less than wall time")
    print(f"{'command':42} {'min':>7} {'median':>7} {'max':>7} {'x anchor':>8} {'cpu x':>6} {'goal':>7}  verdict")
    for row in rows:
        median = statistics.median(row.times)
        goal = row.goal(anchor) if row.goal else None
        verdict = "" if goal is None else ("ok" if median <= goal else "MISSED")
        goal_s = "" if goal is None else f"{goal:.3f}"
        print(f"{row.name:42} {min(row.times):7.3f} {median:7.3f} {max(row.times):7.3f} {median / anchor:8.2f} "
              f"{statistics.median(row.cpu) / anchor_cpu:6.2f} {goal_s:>7}  {verdict}")


if __name__ == "__main__":
    main()
