"""Tail emulated jobs of 1 to 256 hosts with `smp-launch logs` and with the SDK's `logs_for_job`, same data.

Both tools follow the same scripted job (launcher.emulator, through a moto server in this process),
on one virtual clock, so a 3-minute job runs in seconds and neither tool's sleeps cost wall time.
Per run: CloudWatch Logs HTTP requests per poll (retries included), lines lost and duplicated against
what the hosts wrote, and the tool's own CPU time (its thread only; the server's is excluded) per
100k lines printed. The SDK loops forever above 50 hosts (reference: cloudwatch_logs_and_moto.md
section 1), so it gets a bounded wall-clock budget and the table says when it did not finish.

Goals (issue "5. Follow a running job at any scale"): at most 2 calls per poll at every host
count, 0 lost, 0 duplicated, also with 20% of calls throttled.
"""
from __future__ import annotations

import contextlib
import gc
import io
import logging
import os
import random
import sys
import threading
import time
import types
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

HOSTS = [int(h) for h in os.environ.get("BENCH_HOSTS", "1,8,64,256").split(",")]
THROTTLE = (0.0, 0.2)
SDK_BUDGET_S = float(os.environ.get("BENCH_SDK_BUDGET_S", "10"))
POLL_S = 5.0
LINES_PER_JOB = 12_000
TRAINING_S = 120.0
START = 1_800_000_000.0


class VirtualClock:
    def __init__(self, start: float):
        self.t = start
        self.lock = threading.Lock()

    def __call__(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        with self.lock:
            self.t += max(0.0, seconds)


class VirtualTime(types.ModuleType):
    """`time` as the SDK and botocore's retry loop see it: virtual now and sleep, the rest real."""

    def __init__(self, clock: VirtualClock):
        super().__init__("time")
        self._clock = clock

    def __getattr__(self, name):
        return getattr(time, name)

    def time(self) -> float:
        return self._clock()

    def sleep(self, seconds: float) -> None:
        self._clock.sleep(seconds)


class Aborted(Exception):
    pass


def scenario(hosts: int):
    from launcher.emulator import EmulatedJob

    return EmulatedJob(f"bench-{hosts}", hosts=hosts, starting=20, downloading=10, training=TRAINING_S,
                       uploading=10, line_interval=TRAINING_S * hosts / LINES_PER_JOB,
                       late_hosts={h: 7.0 for h in range(8, hosts + 1, 8)}, backdate_every=10,
                       backdate_seconds=3.0, decoy=True)


def start_job(endpoint: str, hosts: int, clock: VirtualClock):
    import boto3

    from launcher import emulator

    emulator.reset_server(endpoint)
    clock.t = START
    sm = boto3.client("sagemaker", endpoint_url=endpoint, region_name="us-west-2")
    return emulator.add_job(scenario(hosts), sm)


def tally(expected: list[str], printed: list[str]) -> tuple[int, int]:
    wanted = set(expected)
    want, got = Counter(expected), Counter(m for m in printed if m in wanted)
    return sum((want - got).values()), sum(n - 1 for n in got.values() if n > 1)


def run_ours(endpoint: str, hosts: int, fraction: float, clock: VirtualClock) -> dict:
    from launcher import emulator
    from launcher.aws import Clients
    from launcher.tail import RateLimiter, follow

    job = start_job(endpoint, hosts, clock)
    clients = Clients(region="us-west-2")
    policy = emulator.attach(clients.logs, emulator.Throttle(fraction, seed=hosts))
    clients.sagemaker  # noqa: B018  (clients are made before the clock starts, as for the SDK)
    out = io.StringIO()
    gc.collect()
    cpu = time.thread_time()
    result = follow(job.name, clients, interval=POLL_S, out=out, err=io.StringIO(), color=False, clock=clock,
                    sleep=clock.sleep, rng=random.Random(0),
                    limiter=RateLimiter(2.0, clock=clock, sleep=clock.sleep))
    cpu = time.thread_time() - cpu
    printed = [line.split("] ", 1)[1] for line in out.getvalue().splitlines()]
    lost, dup = tally(job.expected_messages(), printed)
    return {"tool": "smp-launch", "finished": result.status == "Completed", "polls": result.stats.polls,
            "requests": policy.calls, "throttled": policy.throttled, "lines": len(printed), "lost": lost,
            "dup": dup, "cpu": cpu, "expected": len(job.expected_messages()),
            "decoy": sum("decoy" in m for m in printed)}


def run_sdk(endpoint: str, hosts: int, fraction: float, clock: VirtualClock) -> dict:
    import boto3
    import sagemaker.session as sdk_session

    from launcher import emulator

    job = start_job(endpoint, hosts, clock)
    boto_session = boto3.Session(region_name="us-west-2")
    policy = emulator.attach(boto_session, emulator.Throttle(fraction, seed=hosts))
    abort = threading.Event()

    def stop_when_asked(**_kw):
        if abort.is_set():
            raise Aborted()

    boto_session.events.register("before-call", stop_when_asked)
    session = sdk_session.Session(boto_session=boto_session, sagemaker_config={})
    boto_session.client("logs")  # loads the Logs model into the session's cache before the clock starts
    flushes = [0]
    original_flush = sdk_session._flush_log_streams

    def counting_flush(*args, **kwargs):
        flushes[0] += 1
        return original_flush(*args, **kwargs)

    sdk_session._flush_log_streams = counting_flush
    out = io.StringIO()
    box: dict = {}

    def target():
        cpu = time.thread_time()
        try:
            with contextlib.redirect_stdout(out):
                session.logs_for_job(job.name, wait=True, poll=POLL_S)
            box["finished"] = True
        except Aborted:
            box["finished"] = False
        finally:
            box["cpu"] = time.thread_time() - cpu

    gc.collect()
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(SDK_BUDGET_S)
    if thread.is_alive():
        abort.set()
        thread.join(60)
    sdk_session._flush_log_streams = original_flush
    expected = set(job.expected_messages())
    printed = [line for line in out.getvalue().splitlines() if line in expected or "decoy" in line]
    lost, dup = tally(job.expected_messages(), printed)
    return {"tool": "SDK logs_for_job", "finished": box.get("finished", False), "polls": flushes[0],
            "requests": policy.calls, "throttled": policy.throttled, "lines": len(printed), "lost": lost,
            "dup": dup, "cpu": box.get("cpu", 0.0), "expected": len(expected),
            "decoy": sum("decoy" in m for m in printed)}


def main() -> None:
    logging.disable(logging.WARNING)  # the SDK logs its config look-ups at import
    import botocore.endpoint
    import sagemaker.session as sdk_session

    from launcher import emulator

    clock = VirtualClock(START)
    emulator.set_clock(clock)
    virtual = VirtualTime(clock)
    sdk_session.time = virtual  # the SDK's poll sleeps and its 30 s describe timer
    botocore.endpoint.time = virtual  # botocore's retry backoff sleeps
    with emulator.server() as endpoint:
        os.environ.update(emulator.server_env(endpoint))
        rows = []
        for hosts in HOSTS:
            for fraction in THROTTLE:
                for run in (run_ours, run_sdk):
                    t0 = time.perf_counter()
                    row = run(endpoint, hosts, fraction, clock)
                    row.update(hosts=hosts, fraction=fraction, wall=time.perf_counter() - t0)
                    rows.append(row)
                    print(f"  ran {row['tool']:16} hosts={hosts:<3} throttled={fraction:.0%} "
                          f"in {row['wall']:.1f}s wall", file=sys.stderr)
    print_table(rows)


def print_table(rows: list[dict]) -> None:
    print(f"poll {POLL_S:g} s; ~{LINES_PER_JOB:,} lines a job over {TRAINING_S:g} s of training; every 8th host "
          "starts 7 s late; every 10th line is ingested 3 s late; a decoy job shares the prefix; "
          f"SDK budget {SDK_BUDGET_S:g} s wall")
    head = (f"{'tool':17} {'hosts':>5} {'thr.':>5} {'finished':>9} {'polls':>6} {'calls/poll':>10} "
            f"{'lines':>7} {'lost':>7} {'dup':>5} {'decoy':>5} {'CPU s/100k':>10}  goals")
    print(head)
    print("-" * len(head))
    for r in rows:
        per_poll = r["requests"] / r["polls"] if r["polls"] else float("inf")
        cpu = f"{r['cpu'] / r['lines'] * 100_000:.2f}" if r["lines"] else "-"
        finished = "yes" if r["finished"] else "NO (hung)"
        goals = ""
        if r["tool"] == "smp-launch":
            ok = per_poll <= 2 and r["lost"] == 0 and r["dup"] == 0 and r["finished"] and not r["decoy"]
            goals = "met" if ok else "MISSED"
        print(f"{r['tool']:17} {r['hosts']:>5} {r['fraction']:>5.0%} {finished:>9} {r['polls']:>6} "
              f"{per_poll:>10.2f} {r['lines']:>7} {r['lost']:>7} {r['dup']:>5} {r['decoy']:>5} {cpu:>10}  {goals}")


if __name__ == "__main__":
    main()
