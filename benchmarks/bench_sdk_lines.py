"""`submit` on each SageMaker SDK line and backend, against the same emulator, measured in one run, interleaved.

Rows: SDK 2.x with the PyTorch Estimator (the anchor: the launcher's first path), SDK 2.x with ModelTrainer, SDK
3.x with ModelTrainer (its only backend), each the installed CLI of its environment (`.venv`, `.venv-sdk3`: `make
venv venv-sdk3`). Each round runs every row once in a rotating order; the first round only warms the file cache
and is dropped. Every timed submit must start a job without uploading the source again (ModelTrainer still
uploads its drivers, as it does on AWS).

Goal: submit on 3.x within 1.10x of submit on 2.x (the Estimator).
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
RUNS = int(os.environ.get("BENCH_RUNS", "7"))
SPEC = "jobs/llama7b.yaml"
GOAL = 1.10


@dataclass
class Row:
    name: str
    cmd: list[str]
    times: list[float] = field(default_factory=list)
    calls: int = 0


def submit(venv: str, backend: str) -> list[str]:
    return [str(REPO / venv / "bin" / "smp-launch"), "submit", SPEC, "--set", "role=Good", "--backend", backend,
            "--output", "json"]


def timed(row: Row, env: dict[str, str]) -> float:
    started = time.perf_counter()
    out = subprocess.run(row.cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    elapsed = time.perf_counter() - started
    try:
        result = json.loads(out.stdout)
    except ValueError:
        raise SystemExit(f"{row.name}: exit {out.returncode}, not JSON: {out.stderr.strip()[-300:]}") from None
    if out.returncode != 0 or not result.get("job_name") or result.get("uploaded"):
        raise SystemExit(f"{row.name}: exit {out.returncode}, uploaded={result.get('uploaded')}: "
                         f"{out.stderr.strip()[-300:]}")
    row.calls = len(result["aws_calls"])
    return elapsed


def main() -> None:
    from benchmarks.bench_cli import emulated_aws

    rows = [Row("submit, SDK 2.x, estimator (anchor)", submit(".venv", "estimator")),
            Row("submit, SDK 2.x, model-trainer", submit(".venv", "model-trainer")),
            Row("submit, SDK 3.x, model-trainer", submit(".venv-sdk3", "model-trainer"))]
    missing = [r.cmd[0] for r in rows if not Path(r.cmd[0]).exists()]
    if missing:
        raise SystemExit(f"no CLI at {', '.join(missing)}: run `make venv venv-sdk3` first")
    with emulated_aws() as env:
        for row in rows:  # each backend's source (its spec.json names the backend) uploaded once, before timing
            first = subprocess.run(row.cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
            if first.returncode != 0:
                raise SystemExit(f"{row.name}: exit {first.returncode}: {first.stderr.strip()[-300:]}")
        for r in range(RUNS + 1):  # round 0 warms the file cache and is dropped
            shift = r % len(rows)
            for row in rows[shift:] + rows[:shift]:
                elapsed = timed(row, env)
                if r:
                    row.times.append(elapsed)
    anchor = statistics.median(rows[0].times)
    print(f"wall seconds over {RUNS} interleaved rounds; {sys.platform}, Python {sys.version.split()[0]}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end")
    print(f"{'command':40} {'min':>7} {'median':>7} {'max':>7} {'x anchor':>8} {'AWS calls':>9} {'goal':>6}  verdict")
    for row in rows:
        median = statistics.median(row.times)
        goal = f"{GOAL:.2f}x" if "3.x" in row.name else ""
        verdict = ("ok" if median <= GOAL * anchor else "MISSED") if goal else ""
        print(f"{row.name:40} {min(row.times):7.3f} {median:7.3f} {max(row.times):7.3f} {median / anchor:8.2f} "
              f"{row.calls:9d} {goal:>6}  {verdict}")


if __name__ == "__main__":
    main()
