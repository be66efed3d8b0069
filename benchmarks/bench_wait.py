"""`wait` on 200 jobs: the SageMaker calls one poll makes, by the jobs' state, with Search and without it.

The emulated jobs (in-process moto, emulator/) run on a virtual clock; each case creates 200 jobs, lets them
reach their state, and counts the SageMaker calls of wait's first poll (botocore's before-call event), then
of the same poll made the old way (one DescribeTrainingJob a job: `use_search=False`). Goal: at most 3
SageMaker calls a poll at 200 jobs, whatever their state. Results: benchmarks/results/bench_wait.txt.
"""
from __future__ import annotations

import os
import sys
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import emulator  # noqa: E402
from emulator import failures, quotas  # noqa: E402
from tests.emulation import VirtualClock  # noqa: E402

RESULTS = REPO / "benchmarks" / "results" / "bench_wait.txt"
JOBS = 200
GOAL = 3
QUICK = dict(starting=0.05, downloading=0.05, training=0.3, uploading=0.05, line_interval=0.05, decoy=False)
CASES = {  # name: the script of job i
    "running": lambda i: {**QUICK, "training": 3600},
    "completed": lambda i: dict(QUICK),
    "failed (out of memory)": lambda i: failures.out_of_memory(**QUICK),
    "stopped": lambda i: {**QUICK, "stop_after": 0.2, "stopping": 0.05},
    "ended, a third of each": lambda i: (dict(QUICK), failures.out_of_memory(**QUICK),
                                         {**QUICK, "stop_after": 0.2, "stopping": 0.05})[i % 3],
}


def first_poll(clock: VirtualClock, names: list[str], use_search: bool) -> Counter:
    """The SageMaker calls of wait's first poll over `names` (it stops after that poll)."""
    from launcher.core.aws import Clients
    from launcher.jobs import status

    clients = Clients(region="us-west-2")
    calls: Counter = Counter()
    clients.sagemaker.meta.events.register("before-call.sagemaker", lambda model, **_kw: calls.update([model.name]))
    status.wait(clients, names, timeout=0.0, interval=1.0, sleep=clock.sleep, clock=clock, use_search=use_search)
    return calls


def main() -> None:
    import boto3

    import launcher.jobs.status

    for k, v in emulator.FAKE_CREDENTIALS.items():
        os.environ[k] = v
    os.environ["AWS_REGION"] = "us-west-2"
    rows = []
    for case, script in CASES.items():
        clock = VirtualClock()
        emulator.set_clock(clock)
        launcher.jobs.status.time = SimpleNamespace(sleep=clock.sleep, monotonic=clock)  # type: ignore[attr-defined]
        with emulator.mocked():
            quotas.set_quota("ml.p4d.24xlarge", 10 * JOBS)
            sm = boto3.client("sagemaker", region_name="us-west-2")
            names = []
            for i in range(JOBS):
                name = f"bench-{i:03d}-{'x' * 40}"
                emulator.add_job(emulator.EmulatedJob(name, **script(i)), sm)
                names.append(name)
            clock.sleep(5.0)  # every job has reached its state
            searched = first_poll(clock, names, use_search=True)
            described = first_poll(clock, names, use_search=False)
        emulator.set_clock(None)
        rows.append((case, searched, described))
    lines = [f"wait on {JOBS} jobs: SageMaker calls in one poll (goal: at most {GOAL})", "",
             "| jobs | calls with Search | of which DescribeTrainingJob | calls describing each job |",
             "| --- | ---: | ---: | ---: |"]
    worst = 0
    for case, searched, described in rows:
        total = sum(searched.values())
        worst = max(worst, total)
        lines.append(f"| {JOBS} {case} | {total} | {searched.get('DescribeTrainingJob', 0)} | "
                     f"{sum(described.values())} |")
    lines += ["", f"worst: {worst} calls a poll: {'within' if worst <= GOAL else 'OVER'} the goal of {GOAL}"]
    text = "\n".join(lines) + "\n"
    RESULTS.write_text(text)
    print(text, end="")
    if worst > GOAL:
        sys.exit(1)


if __name__ == "__main__":
    main()
