"""CLI start-up against the SageMaker SDK's own import, measured in the same run.

Goals (issue "1. Foundation"): `smp-launch --help` under 0.3 s; `plan jobs/llama7b.yaml` under a
quarter of `python -c "import sagemaker"`.
"""
from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RUNS = int(os.environ.get("BENCH_RUNS", "7"))


def wall(cmd: list[str]) -> float:
    times = []
    env = {**os.environ, "SAGEMAKER_SUPPRESS_V2_WARNING": "1"}
    for _ in range(RUNS + 1):  # the first run warms the file cache and is dropped
        t0 = time.perf_counter()
        subprocess.run(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times[1:])


def main() -> None:
    exe = shutil.which("smp-launch", path=str(Path(sys.executable).parent)) or "smp-launch"
    jobs = sorted(str(p) for p in (REPO / "jobs").glob("*.yaml"))
    anchor = wall([sys.executable, "-c", "import sagemaker"])
    rows = [
        ("python -c 'import sagemaker' (anchor)", anchor, None),
        ("smp-launch --help", wall([exe, "--help"]), 0.3),
        ("smp-launch plan jobs/llama7b.yaml", wall([exe, "plan", "jobs/llama7b.yaml"]), anchor / 4),
        ("smp-launch plan --output json", wall([exe, "plan", "jobs/llama7b.yaml", "--output", "json"]), anchor / 4),
        ("smp-launch validate jobs/*.yaml", wall([exe, "validate", *jobs]), anchor / 4),
    ]
    print(f"median of {RUNS} runs, {sys.platform}, Python {sys.version.split()[0]}")
    print(f"{'command':45} {'wall s':>8} {'x anchor':>9} {'goal s':>8}  verdict")
    for name, t, goal in rows:
        verdict = "" if goal is None else ("ok" if t <= goal else "MISSED")
        goal_s = "" if goal is None else f"{goal:.3f}"
        print(f"{name:45} {t:8.3f} {t / anchor:9.2f} {goal_s:>8}  {verdict}")


if __name__ == "__main__":
    main()
